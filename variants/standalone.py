"""One attention variant on its own, as attention-gym's examples run: `python -m
compilekit.variants.naive` (any variant's module) prints its time per call at the default shape
and its error against float64 causal attention. Torch and Triton only: what a cell measures
(compile modes, the profile, the kernel map, a bare re-time) is `compilekit run`'s.
"""

from __future__ import annotations

import os
import statistics
import sys
import time

import torch

from compilekit.model.errors import Unsupported
from compilekit.variants.masks import reference as causal_reference

# the default shapes of `compilekit run` (B, H, S, D) and their dtypes
DEFAULT = {"cuda": ((8, 16, 1024, 64), torch.bfloat16), "cpu": ((1, 8, 512, 64), torch.float32)}


def inputs(device: str, seed: int = 0) -> tuple:
    """q, k, v at the device's default shape: fresh normal draws under `seed`."""
    shape, dtype = DEFAULT[device]
    gen = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(shape, generator=gen).to(device, dtype) for _ in range(3))


def per_call_ms(fn, device: str) -> float:
    """Triton's do_bench on CUDA (its median); on the CPU the median of timed calls after
    three warm-up calls."""
    if device == "cuda":
        from triton.testing import do_bench

        return do_bench(fn, return_mode="median")
    for _ in range(3):
        fn()
    times = []
    for _ in range(10):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def relative_error(out: torch.Tensor, truth: torch.Tensor) -> float:
    """max |out - truth| over max |truth|, in float64."""
    return ((out.double() - truth).abs().max() / truth.abs().max()).item()


def main(path: str, attention, reference=None) -> int:
    """Run `attention` (the variant in file `path`) at the default shape: print its time and
    its error, or the line that says why it cannot run here (exit 2)."""
    name = os.path.splitext(os.path.basename(path))[0]
    device = "cuda" if torch.cuda.is_available() else "cpu"
    q, k, v = inputs(device)
    try:
        out = attention(q, k, v)
    except Unsupported as exc:
        print(f"{name}: {exc}", file=sys.stderr)
        return 2
    truth = (reference or causal_reference)(*(t.double() for t in (q, k, v)))
    error = relative_error(out, truth)
    ms = per_call_ms(lambda: attention(q, k, v), device)
    shape, dtype = DEFAULT[device]
    print(
        f"{name}: {ms:.3f} ms per call at {'x'.join(map(str, shape))} "
        f"{str(dtype).removeprefix('torch.')} on {device}; max error {error:.1e} of the "
        f"largest output, against float64 {'(its own reference)' if reference else 'attention'}"
    )
    return 0
