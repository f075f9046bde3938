"""Re-read the `--paired` checks kept in verify.json files under today's rule: each pair's loops
matched at a CPU speed both processes ran at (samespeed.match_shared), the verdict from the
90% interval (pairstats.decide). A verdict printed by an older rule can be re-read from its raw
figures, not only its line.

Usage: python3 experiments/reread_pairs.py VERIFY_JSON... [--tolerance 0.05]
  (h200_verify.sh brings the GPU tests' copies back under verify_evidence/)
"""

from __future__ import annotations

import argparse
import json

from compilekit import pairstats, verify


def reread(entry: dict, tolerance: float) -> str:
    """One paired entry's ratios and verdict, as `compilekit verify --paired` would print now."""
    readings = [verify.pair_reading(pair) for pair in entry["pairs"]]
    ratios = [ratio for ratio, _ in readings if ratio is not None]
    decision = pairstats.decide(ratios, tolerance)
    interval = f"{decision.low:.3f}-{decision.high:.3f}" if decision.low is not None else "-"
    verdict = verify._paired_words(decision, len(ratios), tolerance)  # --paired's own words
    return f"pairs: {'; '.join(w for _, w in readings)}; 90% interval {interval}: {verdict}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+")
    parser.add_argument("--tolerance", type=float, default=0.05)
    args = parser.parse_args()
    for path in args.files:
        for entry in json.load(open(path)):
            if entry["kind"] == "paired":
                print(f"{path} ({entry['at']}, then: {entry['verdict']})")
                print("  " + reread(entry, args.tolerance))


if __name__ == "__main__":
    main()
