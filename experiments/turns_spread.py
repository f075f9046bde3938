"""How far apart two bare processes of one cell read when they take turns loop by loop
(compilekit/turns.py), as `compilekit verify --paired` sets the toolkit's process against a
bare one: what a pair's ratio is worth when neither side is the toolkit.

Each pair: a bare process (verify's child) starts and waits; a second bare process leads,
timing `--turns` loops and handing the turn over after each. A pair's ratio is the median of
its turns' ratios. Pairs of identical processes that read apart show each process's own luck
(its memory layout, where its threads run), which no loop-by-loop pairing removes.

Usage: python3 experiments/turns_spread.py RUN_DIR [--pairs 5] [--turns 60] [--cpu N|free]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
from types import SimpleNamespace

from compilekit import pairstats, runner, turns, verify


def bare_pair(cell, env: dict, calls: int, turns_taken: int, cpu: int | None) -> list:
    """One pair's turns: [[leader ms, leader ns, follower ms, follower ns], ...]."""

    def lead(channel: str):
        command = verify._bare_command(cell, calls, turns_taken)
        proc = subprocess.run(
            command, env={**env, turns.LEAD_ENV: channel}, capture_output=True, text=True
        )
        verify._bare_figures(proc.returncode, proc.stdout, proc.stderr)
        return SimpleNamespace(measured=True)

    _, bare = verify._pair_by_turns(cell, env, calls, "", "", cpu, lead=lead)
    return bare.get("turns") or []


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir")
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--turns", type=int, default=60)
    parser.add_argument(
        "--cpu",
        default=str(verify.turns_cpu()),
        help="the one CPU both processes of a pair run on, as `verify --paired` runs them "
        "(default: %(default)s), or 'free': wherever the system puts them",
    )
    args = parser.parse_args()
    cpu = None if args.cpu == "free" else int(args.cpu)
    result, cell = verify._measured_cell(args.run_dir)
    calls = verify._figure(result).calls or 20
    env = verify._bare_env(cell, os.environ.get("COMPILEKIT_CACHE") or runner.default_cache_root())
    ratios = []
    for i in range(args.pairs):
        rows = bare_pair(cell, env, calls, args.turns, cpu)
        each = turns.ratios(rows)
        ratio = turns.median_ratio(rows)
        if ratio is not None:
            ratios.append(ratio)
            q = statistics.quantiles(each, n=10)
            leader, follower = (statistics.median(r[k] for r in rows) for k in (0, 2))
            print(
                f"pair {i + 1}: {len(rows)} turns, leader over follower: median {ratio:.3f} "
                f"(p10 {q[0]:.3f}, p90 {q[-1]:.3f}); leader {leader:.4f} ms, "
                f"follower {follower:.4f} ms",
                flush=True,
            )
        else:
            print(f"pair {i + 1}: {len(rows)} turns, no ratio", flush=True)
    decision = pairstats.decide(ratios, 0.05)
    if decision.low is not None:
        print(
            f"bare against bare, {len(ratios)} pairs: {', '.join(f'{r:.3f}' for r in ratios)}; "
            f"90% interval {decision.low:.3f}-{decision.high:.3f}"
        )


if __name__ == "__main__":
    main()
