"""triton-flash at decode shapes under each split policy: PROGRAMS_PER_SM (programs in flight
per SM) x MIN_SPLIT (keys per split at least), against the best SDPA backend's do_bench median
at the same shape. Picks variants/triton_flash_decode.py's constants; the published cells come
from a sweep.

Usage (GPU): python dev/decode_split_tune.py [--shapes "S;S"] [--json out.json]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from decode_varlen_bench import DECODE_SHAPES, row  # noqa: E402

from compilekit.variants import triton_flash_decode as decode  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", default=DECODE_SHAPES)
    parser.add_argument("--per-sm", default="2,4,8")
    parser.add_argument("--min-split", default="64,128,256")
    parser.add_argument("--repeats", type=int, default=3, help="do_bench runs per row (median)")
    parser.add_argument("--json")
    args = parser.parse_args()
    rows = []
    for shape in args.shapes.split(";"):
        sdpa = [
            row(p, shape, False, "cuda", args.repeats)
            for p in ("sdpa", "sdpa-cudnn", "sdpa-flash")
        ]
        best = min((r for r in sdpa if "ms" in r), key=lambda r: r["ms"])
        print(f"{shape:24} best SDPA {best['variant']}: {best['ms']:.4f} ms", flush=True)
        for per_sm, min_split in itertools.product(
            map(int, args.per_sm.split(",")), map(int, args.min_split.split(","))
        ):
            decode.PROGRAMS_PER_SM, decode.MIN_SPLIT = per_sm, min_split
            decode._FAST_LAUNCH.clear()
            r = row("triton-flash", shape, True, "cuda", args.repeats)
            r.update(per_sm=per_sm, min_split=min_split, best_sdpa_ms=best["ms"])
            rows.append(r)
            figures = r.get("error") or (
                f"{r['ms']:.4f} ms  {best['ms'] / r['ms']:.2f}x best SDPA  "
                f"err {r['max_rel_err']:.1e}"
            )
            print(f"  per_sm {per_sm}  min_split {min_split:4}  {figures}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
