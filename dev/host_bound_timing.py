"""How a host-bound callable's time depends on the way it is taken (GPU).

triton.testing.do_bench, which compilekit and `compilekit verify` time with, clears L2 before
each timed call with a memset of its 256 MB buffer. While the GPU runs that memset the host may
already be issuing the call: when the host's cost per iteration stays below the memset's GPU
time, the call's kernels are queued before its start event and do_bench reads device time; when
not, part of the host's cost shows. A host-bound cell sits near that edge, which would explain
why its do_bench figure moves between fresh processes (issue 8's INCONCLUSIVE cells).

For each callable, three times over: do_bench's median; device events around 200 back-to-back
calls (no flush: the GPU's pace when the host keeps up); the host's cost of issuing one call (a
launch-only loop of 50); and a user's loop (2,000 calls, wall time per call, synchronized at
the end), which is max(host, device) per call.

Usage (GPU): python3 dev/host_bound_timing.py [SHAPE ...]   (default 1x4x128x64)
"""

from __future__ import annotations

import math
import statistics
import sys
import time

import torch


def _sdpa(q, k, v):
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)


def _naive(q, k, v):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    mask = torch.ones(scores.shape[-2:], dtype=torch.bool, device=q.device).triu(1)
    return torch.softmax(scores.masked_fill(mask, float("-inf")), dim=-1) @ v


def callables():
    """(name, callable) for the issue's host-bound cells and their eager/device-bound kin."""
    return [
        ("sdpa eager", _sdpa),
        ("sdpa default", torch.compile(_sdpa)),
        ("naive default", torch.compile(_naive)),
        ("naive reduce-overhead", torch.compile(_naive, mode="reduce-overhead")),
    ]


def user_loop_ms(fn, calls: int = 2000) -> float:
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / calls * 1e3


def host_ms(fn, calls: int = 50) -> float:
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    host = (time.perf_counter() - start) / calls * 1e3
    torch.cuda.synchronize()
    return host


def back_to_back_ms(fn, calls: int = 200) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(calls):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / calls


def main() -> int:
    try:
        shapes = [tuple(int(x) for x in s.split("x")) for s in sys.argv[1:] or ["1x4x128x64"]]
    except ValueError:
        shapes = []
    if not shapes or any(len(s) != 4 for s in shapes):
        print("host_bound_timing: shapes are BxHxSxD, e.g. 1x4x128x64", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("host_bound_timing: needs a CUDA GPU", file=sys.stderr)
        return 2
    from triton.testing import do_bench

    for shape in shapes:
        q, k, v = (torch.randn(shape, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        print("x".join(map(str, shape)), "(ms; three repeats each)", flush=True)
        for name, f in callables():

            def fn(f=f):
                return f(q, k, v)

            for _ in range(30):  # compile, record the CUDA graph, warm the allocator
                fn()
            torch.cuda.synchronize()
            rows = [
                (
                    statistics.median(do_bench(fn, warmup=25, rep=500, return_mode="all")),
                    back_to_back_ms(fn),
                    host_ms(fn),
                    user_loop_ms(fn),
                )
                for _ in range(3)
            ]
            cols = ["/".join(f"{x:.4f}" for x in col) for col in zip(*rows)]
            print(
                f"  {name:22s} do_bench {cols[0]}  back-to-back {cols[1]}  host {cols[2]}  "
                f"user loop {cols[3]}",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
