"""Where a compiled call's host time goes, layer by layer (CPU or GPU).

A host-bound cell (dev/results/h200/host_bound_timing) pays more host time per call
compiled than eager: compiled SDPA at 1x4x128x64 on the H200 costs 0.043-0.093 ms against
eager's 0.015-0.023. This script times eager and compiled SDPA's host cost per call at a small
shape, then profiles compiled calls with cProfile and splits each call's own (tottime) Python
time among the layers it passes: Dynamo's frame evaluation and guards, AOTAutograd's runtime
wrappers, Inductor's compiled module (its wrapper and generated `call`), the ops it runs, and
the rest. cProfile slows Python down, so its shares say where the time goes, not how much.

Usage: python3 dev/compiled_host_cost.py [--shape 1x4x128x64] [--device cpu|cuda]
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import time
from collections import defaultdict

import torch

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


def layer_shares(fn, args) -> dict[str, float]:
    """{layer: share of the profiled calls' own time}."""
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(CALLS):
        fn(*args)
    profile.disable()
    own = defaultdict(float)
    for (filename, _, name), row in pstats.Stats(profile).stats.items():
        own[layer_of(filename, name)] += row[2]  # tottime
    total = sum(own.values()) or 1.0
    return {layer: t / total for layer, t in sorted(own.items(), key=lambda kv: -kv[1])}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", default="1x4x128x64")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
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
    dtype = torch.bfloat16 if args.device == "cuda" else torch.float32
    qkv = [torch.randn(shape, device=args.device, dtype=dtype) for _ in range(3)]
    compiled = torch.compile(_sdpa)
    for _ in range(30):  # compile, then warm both
        compiled(*qkv), _sdpa(*qkv)
    eager_us = host_us_per_call(_sdpa, qkv, args.device)
    compiled_us = host_us_per_call(compiled, qkv, args.device)
    print(
        f"sdpa {args.shape} {dtype} {args.device}, torch {torch.__version__}: host per call "
        f"eager {eager_us:.1f} us, compiled {compiled_us:.1f} us "
        f"({compiled_us - eager_us:+.1f} us)"
    )
    print("compiled calls' own Python time by layer (cProfile, 2,000 calls):")
    for layer, share in layer_shares(compiled, qkv).items():
        print(f"  {share:6.1%}  {layer}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
