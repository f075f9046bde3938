"""A variant called at a shape a few times, its last call inside an NVTX range named `timed`:
what a profiler that reads one kernel's hardware counters (Nsight Compute) is pointed at, after
warm-up calls that compile and autotune. bf16 on a GPU (float32 elsewhere, a smoke run).

Usage: python dev/attention_calls.py VARIANT SHAPE [--calls 5] [--compiled]
With ncu (phase P of dev/h200_check.sh):
    ncu --clock-control none --nvtx --nvtx-include "timed/" python dev/attention_calls.py \\
        gluon-flash 1x32x8192x128
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402

from compilekit.compile.variant import load_variant  # noqa: E402
from compilekit.measure import inputs as inputs_mod  # noqa: E402
from compilekit.model.errors import UserError  # noqa: E402
from compilekit.model.spec import Cell, parse_shape  # noqa: E402


def calls(name: str, shape_text: str, count: int, compiled: bool) -> torch.Tensor:
    """The variant's output after `count` calls, the last inside the NVTX range `timed`."""
    device = "cuda" if torch.cuda.is_available() else "cpu"
    dtype = "bfloat16" if device == "cuda" else "float32"
    variant = load_variant(name)
    cell = Cell(name, "eager", parse_shape(shape_text), dtype, device)
    args = inputs_mod.cell_inputs(variant, cell)
    fn = torch.compile(variant.attention) if compiled else variant.attention
    for _ in range(count - 1):
        fn(*args)
    nvtx = torch.cuda.nvtx if device == "cuda" else None
    if nvtx:
        torch.cuda.synchronize()
        nvtx.range_push("timed")
    out = fn(*args)
    if nvtx:
        torch.cuda.synchronize()
        nvtx.range_pop()
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("variant")
    parser.add_argument("shape", help="BxHxSxD, as a cell's")
    parser.add_argument("--calls", type=int, default=5, help="calls in all, the last one timed")
    parser.add_argument("--compiled", action="store_true", help="under torch.compile default")
    args = parser.parse_args(argv)
    if args.calls < 1:
        print(f"attention_calls: --calls {args.calls}: give 1 or more", file=sys.stderr)
        return 2
    try:
        out = calls(args.variant, args.shape, args.calls, args.compiled)
    except (UserError, ValueError) as exc:
        print(f"attention_calls: {exc}", file=sys.stderr)
        return 2
    print(f"{args.variant} {args.shape}: {args.calls} calls, out {tuple(out.shape)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
