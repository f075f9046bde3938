"""Where a compiled call's host time goes, layer by layer (CPU or GPU).

A host-bound cell (dev/results/h200/host_bound_timing) pays more host time per call
compiled than eager: compiled SDPA at 1x4x128x64 on the H200 costs 0.043-0.093 ms against
eager's 0.015-0.023. This script times eager and compiled SDPA's host cost per call at a small
shape, then profiles compiled calls with cProfile and splits each call's own (tottime) Python
time among the layers it passes: Dynamo's frame evaluation and guards, AOTAutograd's runtime
wrappers, Inductor's compiled module (its wrapper and generated `call`), the ops it runs, and
the rest. cProfile slows Python down, so its shares say where the time goes, not how much.
`--variant NAME` times that attention variant (variants.VARIANTS, e.g. gluon-flash) instead of
SDPA; `--top N` lists the N functions with the most own time per call as well.

Usage: python3 dev/compiled_host_cost.py [--shape 1x4x128x64] [--device cpu|cuda]
       [--variant gluon-flash] [--top 20]
"""

from __future__ import annotations

import argparse
import cProfile
import importlib
import os
import pstats
import sys
import time
from collections import defaultdict

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CALLS = 2000
LAYERS = (  # (layer, substrings of the profiled function's file or name), first match wins
    # the generated `call` checks its inputs' sizes and strides through a Dynamo C helper
    (
        "Inductor compiled module (incl. its input size/stride asserts)",
        ("torch/_inductor/", "torchinductor", "assert_size_stride", "assert_alignment"),
    ),
    ("Dynamo: frame evaluation, guards", ("torch/_dynamo/", "_dynamo.guards", "eval_frame")),
    ("AOTAutograd runtime wrappers", ("torch/_functorch/", "_aot_autograd")),
    (
        "ops: aten, extern kernels, launches (on CPU: their compute)",
        ("torch._ops", "torch._C", "<built-in method"),
    ),
)


def _sdpa(q, k, v):
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)


def host_us_per_call(fn, args, device: str) -> float:
    """Microseconds of host time to issue one call (no synchronize inside the loop)."""
    if device == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(CALLS):
        fn(*args)
    host = (time.perf_counter() - start) / CALLS * 1e6
    if device == "cuda":
        torch.cuda.synchronize()
    return host


def layer_of(filename: str, name: str) -> str:
    where = f"{filename}:{name}"
    for layer, marks in LAYERS:
        if any(mark in where for mark in marks):
            return layer
    return "other (the user's function, Python)"


def profiled(fn, args) -> dict:
    """cProfile's rows for CALLS calls of fn(*args): (file, line, name) -> its stats row."""
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(CALLS):
        fn(*args)
    profile.disable()
    return pstats.Stats(profile).stats


def layer_shares(rows: dict) -> dict[str, float]:
    """{layer: share of the profiled calls' own time}."""
    own = defaultdict(float)
    for (filename, _, name), row in rows.items():
        own[layer_of(filename, name)] += row[2]  # tottime
    total = sum(own.values()) or 1.0
    return {layer: t / total for layer, t in sorted(own.items(), key=lambda kv: -kv[1])}


def top_functions(rows: dict, n: int) -> list[tuple[float, int, str]]:
    """The n functions with the most own time: (µs of own time per call under cProfile, its
    calls per call, where it is), most first."""
    out = []
    for (filename, line, name), row in rows.items():
        where = f"{filename.split('site-packages/')[-1]}:{line}({name})"
        out.append((row[2] / CALLS * 1e6, round(row[1] / CALLS), where))
    return sorted(out, reverse=True)[:n]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", default="1x4x128x64")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--variant", default="sdpa", help="an attention variant's name")
    parser.add_argument("--top", type=int, default=0, help="list this many functions too")
    args = parser.parse_args(argv)
    try:
        shape = tuple(int(x) for x in args.shape.split("x"))
    except ValueError:
        shape = ()
    if len(shape) != 4:
        print("compiled_host_cost: --shape is BxHxSxD, e.g. 1x4x128x64", file=sys.stderr)
        return 2
    if args.device == "cuda" and not torch.cuda.is_available():
        print("compiled_host_cost: no CUDA GPU here; use --device cpu", file=sys.stderr)
        return 2
    from compilekit.variants import VARIANTS

    if args.variant != "sdpa" and args.variant not in VARIANTS:
        print(f"compiled_host_cost: no variant {args.variant!r}; one of {', '.join(VARIANTS)}",
              file=sys.stderr)  # fmt: skip
        return 2
    eager = _sdpa
    if args.variant != "sdpa":
        eager = importlib.import_module(VARIANTS[args.variant]).attention
    dtype = torch.bfloat16 if args.device == "cuda" else torch.float32
    qkv = [torch.randn(shape, device=args.device, dtype=dtype) for _ in range(3)]
    compiled = torch.compile(eager)
    for _ in range(30):  # compile, then warm both
        compiled(*qkv), eager(*qkv)
    eager_us = host_us_per_call(eager, qkv, args.device)
    compiled_us = host_us_per_call(compiled, qkv, args.device)
    print(
        f"{args.variant} {args.shape} {dtype} {args.device}, torch {torch.__version__}: host "
        f"per call eager {eager_us:.1f} us, compiled {compiled_us:.1f} us "
        f"({compiled_us - eager_us:+.1f} us)"
    )
    rows = profiled(compiled, qkv)
    print("compiled calls' own Python time by layer (cProfile, 2,000 calls):")
    for layer, share in layer_shares(rows).items():
        print(f"  {share:6.1%}  {layer}")
    if args.top:
        print("the functions with the most own time, µs per call under cProfile (calls a call):")
        for us, calls, where in top_functions(rows, args.top):
            print(f"  {us:6.2f}  {calls:3d}  {where}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
