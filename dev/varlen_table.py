"""docs/varlen.md's tables from a published varlen sweep (experiments/results/h200/varlen).

Per shape: each variant's effective TFLOP/s at its best mode (the mode in brackets), and
triton-flash-varlen against flex-document and against the best SDPA path; then, per variant under
default, whether a second batch of new lengths recompiled and what its first call cost.

    python dev/varlen_table.py experiments/results/h200/varlen
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from compilekit.model import result as results  # noqa: E402

VARIANTS = ("sdpa-padded", "sdpa-jagged", "varlen-attn", "flex-document", "triton-flash-varlen")
SDPA = ("sdpa-padded", "sdpa-jagged", "varlen-attn")


def load(sweep_dir: str) -> list:
    """Every ok cell of the sweep."""
    cells = []
    for name in sorted(os.listdir(sweep_dir)):
        path = os.path.join(sweep_dir, name)
        if os.path.isdir(path):
            cell = results.read_run(path)
            if cell.status == "ok" and cell.tflops:
                cells.append(cell)
    return cells


def best(cells, shape: str, variants) -> tuple | None:
    """(TFLOP/s, ms, variant, mode) of the fastest cell of `variants` at `shape`."""
    found = [(c.tflops, c.compiled_ms, c.variant, c.mode) for c in cells if c.shape == shape]
    found = [f for f in found if f[2] in variants]
    return max(found, default=None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("sweep_dir")
    cells = load(parser.parse_args().sweep_dir)
    shapes = sorted({c.shape for c in cells}, key=lambda s: (s.split("@")[1], s))
    print("| shape | " + " | ".join(VARIANTS) + " | vs flex | vs best SDPA |")
    print("|---" * (len(VARIANTS) + 3) + "|")
    for shape in shapes:
        row = []
        for variant in VARIANTS:
            b = best(cells, shape, (variant,))
            row.append(f"{b[0]:.0f} ({b[3]})" if b else "-")
        ours, flex, sdpa = (
            best(cells, shape, v) for v in (("triton-flash-varlen",), ("flex-document",), SDPA)
        )
        ratio = lambda other: f"{ours[0] / other[0]:.2f}x" if ours and other else "-"  # noqa: E731
        print(f"| {shape} | " + " | ".join(row) + f" | {ratio(flex)} | {ratio(sdpa)} |")
    print()
    print("| variant (default) | a new batch recompiled | its first call, s (min-max) |")
    print("|---|---|---|")
    for variant in VARIANTS:
        ours = [c for c in cells if c.variant == variant and c.mode == "default"]
        seconds = [c.varlen["second_batch"] for c in ours if (c.varlen or {}).get("second_batch")]
        if seconds:
            again = sum(s["recompiled"] for s in seconds)
            calls = sorted(s["first_call_s"] for s in seconds)
            print(
                f"| {variant} | {again} of {len(seconds)} shapes "
                f"| {calls[0]:.2f}-{calls[-1]:.2f} |"
            )


if __name__ == "__main__":
    main()
