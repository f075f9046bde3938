"""A variant called at a shape a few times, its last call inside an NVTX range named `timed`:
what a profiler that reads one kernel's hardware counters (Nsight Compute) is pointed at, after
warm-up calls that compile and autotune. bf16 on a GPU (float32 elsewhere, a smoke run).

Usage: python dev/attention_calls.py VARIANT SHAPE [--calls 5] [--compiled]
       [--tuned-json OUT.json] [--pin TUNED.json]
With ncu (phase P of dev/h200_check.sh):
    ncu --clock-control none --nvtx --nvtx-include "timed/" python dev/attention_calls.py \\
        gluon-flash 1x32x8192x128

A Triton autotuner times its configs on the first call, and under Nsight Compute, whose
instrumentation distorts those timings, it chose 128-row tiles for triton-flash at
16x16x512x64 where it runs 64x64 tiles otherwise. So: `--tuned-json` writes the config each
autotuner of the variant's code chose (kernel name -> the config's arguments), from a run
without the profiler, and `--pin` gives each such autotuner that one config before the calls.
"""

from __future__ import annotations

import argparse
import json
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


def tuned_configs() -> dict:
    """kernel name -> the arguments of the config its autotuner last chose, for each autotuner
    of the variants' code (compilekit.evidence.autotuned)."""
    from compilekit.evidence import autotuned

    return {
        autotuned.kernel_name(t): t.best_config.all_kwargs()
        for _, t in autotuned.autotuners()
        if getattr(t, "best_config", None) is not None
    }


def pin(configs: dict) -> list[str]:
    """Give each autotuner of a kernel named in `configs` that one config; the names pinned."""
    import triton

    from compilekit.evidence import autotuned

    pinned = []
    for _, tuner in autotuned.autotuners():
        name = autotuned.kernel_name(tuner)
        if name in configs:
            kwargs = dict(configs[name])
            options = {k: kwargs.pop(k) for k in ("num_warps", "num_stages", "num_ctas", "maxnreg")
                       if k in kwargs}  # fmt: skip
            tuner.configs = [triton.Config(kwargs, **options)]
            tuner.cache.clear()
            pinned.append(name)
    return pinned


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("variant")
    parser.add_argument("shape", help="BxHxSxD, as a cell's")
    parser.add_argument("--calls", type=int, default=5, help="calls in all, the last one timed")
    parser.add_argument("--compiled", action="store_true", help="under torch.compile default")
    parser.add_argument("--tuned-json", help="write the configs the autotuners chose here")
    parser.add_argument("--pin", help="a --tuned-json file: each autotuner runs its config")
    args = parser.parse_args(argv)
    if args.calls < 1:
        print(f"attention_calls: --calls {args.calls}: give 1 or more", file=sys.stderr)
        return 2
    try:
        if args.pin:
            with open(args.pin) as f:
                wanted = json.load(f)
            load_variant(args.variant)  # its module, and the autotuners in it
            print(f"pinned: {', '.join(pin(wanted)) or 'nothing (no autotuner named)'}")
        out = calls(args.variant, args.shape, args.calls, args.compiled)
    except (UserError, ValueError, OSError) as exc:
        print(f"attention_calls: {exc}", file=sys.stderr)
        return 2
    print(f"{args.variant} {args.shape}: {args.calls} calls, out {tuple(out.shape)}")
    tuned = tuned_configs()
    for name, config in tuned.items():
        print(f"  {name}: {config}")
    if args.tuned_json:
        with open(args.tuned_json, "w") as f:
            json.dump(tuned, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
