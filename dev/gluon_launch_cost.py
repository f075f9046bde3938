"""Where gluon-flash's eager call spends its host time (GPU, Hopper): the whole call beside its
pieces on the fast path (the launch key, the output allocated, the launch with the descriptors'
CUtensorMaps kept per address: launch.descriptor_launcher), and the launch as Triton makes it
(three descriptors rebased, each expanded into a CUtensorMap encoded anew every call:
make_tensordesc_arg). triton-flash's eager call and both kernels compiled (default) beside, for
scale; the CPU's speed too (dev/cpu_speed.loop_ns): the H200 host's speed moves by half between
processes.

Usage (GPU): python3 dev/gluon_launch_cost.py [--shapes 16x16x512x64,8x16x1024x64]
             [--calls 400] [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import cpu_speed  # dev/cpu_speed.py: a script's own folder is first on sys.path
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def per_call_us(fn, calls: int, rounds: int) -> tuple[float, float]:
    """(median, min) over `rounds` of the host's µs per call of fn() over `calls` calls, the
    GPU synchronized between rounds only (calls queue behind each other as a loop's do)."""
    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        samples.append((time.perf_counter() - start) / calls * 1e6)
        torch.cuda.synchronize()
    return statistics.median(samples), min(samples)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", default="16x16x512x64,8x16x1024x64")
    parser.add_argument("--calls", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("gluon_launch_cost needs a CUDA GPU", file=sys.stderr)
        return 2
    import triton.backends.nvidia.driver as nv_driver

    from compilekit.model.spec import parse_shape
    from compilekit.variants import gluon_flash, launch, triton_flash

    launches = []  # (compiled kernel, grid, descriptor templates) of each new launch key
    keep = gluon_flash.descriptor_launcher

    def capture(compiled, grid, templates, rebase):
        launches.append((compiled, grid, templates))
        return keep(compiled, grid, templates, rebase)

    gluon_flash.descriptor_launcher = capture
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}; µs of host per call, "
          "median (min) of rounds")  # fmt: skip
    for text in args.shapes.split(","):
        shape = parse_shape(text)
        q, k, v = (
            torch.randn(shape.batch, shape.heads, shape.seq, shape.head_dim, device="cuda",
                        dtype=torch.bfloat16)
            for _ in "qkv"
        )  # fmt: skip
        gluon_flash.attention(q, k, v)
        compiled, grid, templates = launches[-1]
        run, tail = gluon_flash._FAST_LAUNCH[gluon_flash.launch_key(q, k, v, True, {})]
        descs = [gluon_flash._rebased(t, x) for t, x in zip(templates, (q, k, v))]
        meta = getattr(compiled.metadata, "tensordesc_meta", None) or [None] * 3
        out = torch.empty_like(q)
        encoded_each_call = launch.direct_launcher(compiled, grid)
        pieces = {
            "gluon-flash eager call": lambda: gluon_flash.attention(q, k, v),
            "  launch key": lambda: gluon_flash.launch_key(q, k, v, True, {}),
            "  output allocated": lambda: torch.empty_like(q),
            "  launch, CUtensorMaps kept": lambda: run((q, k, v), out, *tail),
            "  launch, Triton's path": lambda: encoded_each_call(*descs, out, *tail),
            "    3 descriptors rebased": lambda: [
                gluon_flash._rebased(t, x) for t, x in zip(templates, (q, k, v))
            ],
            "    3 CUtensorMaps encoded": lambda: [
                nv_driver.make_tensordesc_arg(d, m) for d, m in zip(descs, meta)
            ],
            "triton-flash eager call": lambda: triton_flash.attention(q, k, v),
        }
        for mode_name, module in (("gluon-flash", gluon_flash), ("triton-flash", triton_flash)):
            torch._dynamo.reset()
            fn = torch.compile(module.attention)
            pieces[f"{mode_name} compiled (default)"] = lambda fn=fn: fn(q, k, v)
        print(f"{text}  (CPU loop step {cpu_speed.loop_ns():.0f} ns)")
        expect = torch.empty_like(q)
        encoded_each_call(*descs, expect, *tail)
        out.zero_()
        run((q, k, v), out, *tail)
        torch.cuda.synchronize()
        print(f"  kept maps: {len(getattr(run, 'kept', ()))}; the kept maps' output equals "
              f"Triton's path's: {torch.equal(out, expect)}")  # fmt: skip
        for name, fn in pieces.items():
            try:
                median, low = per_call_us(fn, args.calls, args.rounds)
                print(f"  {name:34} {median:7.1f} ({low:.1f})")
            except Exception as exc:  # a piece this Triton lacks: say so, time the rest
                print(f"  {name:34} {type(exc).__name__}: {str(exc)[:120]}")
        print(f"  (CPU loop step after: {cpu_speed.loop_ns():.0f} ns)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
