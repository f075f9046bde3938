"""The kernel sweep's judged shapes in one table: cuDNN's time over each path's (above 1.00:
faster than cuDNN), eagerly and compiled. `python3 dev/kernel_table.py SWEEP_DIR` (a published
folder such as experiments/results/h200/kernel, or a sweep's own)."""

import gzip
import json
import os
import sys

JUDGED = ["8x16x1024x64", "16x16x512x64", "2x32x4096x128", "1x32x8192x128", "3x24x3072x128",
          "2x8x6000x64"]  # fmt: skip
GQA = "1x32x4096x128"  # the -gqa variants: 4 query heads per K/V head
PATHS = [("sdpa-flash", "eager"), ("flex", "default")] + [
    (v, m) for v in ("triton-flash", "gluon-flash") for m in ("eager", "default", "reduce-overhead")
]


def median_ms(folder: str, variant: str, mode: str, shape: str) -> float | None:
    """The cell's compiled_ms (its mode's median), None where it is missing or not ok."""
    base = os.path.join(folder, f"{variant}__{mode}__{shape}__bfloat16__cuda", "result.json")
    for path, opener in ((base + ".gz", gzip.open), (base, open)):
        if os.path.isfile(path):
            with opener(path, "rt") as f:
                record = json.load(f)
            return record["compiled_ms"] if record["status"] == "ok" else None
    return None


def main(folder: str) -> None:
    print("| shape | cuDNN ms | " + " | ".join(f"{v} {m}" for v, m in PATHS) + " |")
    print("|---" * (2 + len(PATHS)) + "|")
    rows = [(s, "", "sdpa-cudnn") for s in JUDGED] + [(GQA, "-gqa", "sdpa-gqa")]
    for shape, suffix, base in rows:
        cudnn = median_ms(folder, base, "eager", shape)
        cells = []
        for variant, mode in PATHS:
            name = variant + suffix if variant.endswith("flash") or variant == "flex" else variant
            ms = median_ms(folder, name, mode, shape)
            cells.append(f"{cudnn / ms:.2f}" if ms and cudnn else "-")
        label = shape + (" GQA 32/8" if suffix else "")
        print(f"| {label} | {cudnn and f'{cudnn:.4f}'} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main(sys.argv[1])
