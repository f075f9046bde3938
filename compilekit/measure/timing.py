"""First-call (compile) time and steady-state latency.

GPU: device events after warm-up, through triton.testing.do_bench (which also flushes L2 between
calls), median and spread; and a user's loop (loop_timing), which also shows what the host
costs. CPU: perf_counter around each call after burn-in (already a user's loop).
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

# Seconds of do_bench's timed calls on a GPU: hundreds of samples for a call under a
# millisecond, whose median moves less than the spread between processes; the bare child of
# `compilekit verify` times with the same.
GPU_BENCH_S = 0.25

if TYPE_CHECKING:  # torch is imported where a GPU or a call needs it: reports read summary()
    import torch


def synchronize(device: str) -> None:
    if device == "cuda":
        import torch

        torch.cuda.synchronize()


def first_call_s(fn: Callable, args, device: str) -> tuple[float, torch.Tensor]:
    """Wall seconds of one call, synchronized: under torch.compile this is the compile time."""
    synchronize(device)
    start = time.perf_counter()
    out = fn(*args)
    synchronize(device)
    return time.perf_counter() - start, out


def summary(samples_ms: list[float]) -> dict:
    """median, p10, p90, min (ms) and the sample count."""
    samples_ms = sorted(samples_ms)
    pick = lambda p: samples_ms[min(len(samples_ms) - 1, int(p * len(samples_ms)))]  # noqa: E731
    return {
        "median_ms": statistics.median(samples_ms),
        "p10_ms": pick(0.1),
        "p90_ms": pick(0.9),
        "min_ms": samples_ms[0],
        "samples": len(samples_ms),
    }


def bench(fn: Callable, args, device: str, budget_s: float | None = None) -> dict:
    """Steady-state latency of fn(*args): median, p10, p90, min in ms and the sample count.

    budget_s: seconds of timed calls (default GPU_BENCH_S on GPU, and 1.0 on CPU).
    """
    if device == "cuda":
        budget_s = budget_s or GPU_BENCH_S
        return _bench_cuda(fn, args, budget_s)
    budget_s = budget_s or 1.0
    for _ in range(3):  # burn-in: allocator, caches, lazy init
        fn(*args)
    samples, deadline = [], time.perf_counter() + budget_s
    while len(samples) < 5 or (time.perf_counter() < deadline and len(samples) < 200):
        start = time.perf_counter()
        fn(*args)
        samples.append((time.perf_counter() - start) * 1e3)
    return summary(samples)


def host_ms_per_call(fn: Callable, args, calls: int = 50, loops: int = 5) -> float:
    """CPU milliseconds to issue one call: the median of host_loops' loops."""
    return host_loops(fn, args, calls, loops)["median_ms"]


def host_calls(per_call_ms: float) -> int:
    """Calls per host loop for a call whose do_bench median is per_call_ms: 50, fewer for a
    long call (at least 10), so that the GPU work each loop queues stays near 20 ms: at
    4x16x16384x128 (10 ms a call) 50 calls would queue half a second per loop."""
    return max(10, min(50, math.ceil(20.0 / max(per_call_ms, 1e-3))))


def host_loops(fn: Callable, args, calls: int = 50, loops: int = 10) -> dict:
    """CPU milliseconds to issue one call (a launch-only loop, no synchronize inside): what
    the host spends per call, whether or not the GPU keeps up. 50 calls stay far under the
    driver's launch queue, so a device-bound call does not block the loop; the queue drains
    between loops. The summary of `loops` loops (one loop is a millisecond or two, which a
    single interrupt or another process's time slice can stretch by half), and each loop's
    ms per call, in order."""
    import torch

    fn(*args)
    torch.cuda.synchronize()
    per_loop = []
    for _ in range(loops):
        start = time.perf_counter()
        for _ in range(calls):
            fn(*args)
        per_loop.append((time.perf_counter() - start) / calls * 1e3)
        torch.cuda.synchronize()
    return {**summary(per_loop), "calls": calls, "loops": [round(ms, 6) for ms in per_loop]}


def loop_timing(fn: Callable, args, per_call_ms: float, budget_s: float = 0.15) -> dict:
    """A user's loop on CUDA: device events around back-to-back calls (no L2 flush, no
    synchronize inside), ms per call, repeated for about budget_s; the repeats' summary, and
    `calls` per repeat (about 2 ms of calls at per_call_ms, the call's do_bench median, so the
    events' own cost is lost in the loop; 5 to 200).

    Each call costs max(host, device) here: a call the GPU finishes before the host has issued
    the next one is paced by the host. do_bench cannot show that: the 256 MB memset it runs
    before each timed call gives the host a head start, so a host-bound call reads anywhere
    between its device time and its host cost."""
    import torch

    for _ in range(3):
        fn(*args)
    torch.cuda.synchronize()
    calls = max(5, min(200, math.ceil(2.0 / max(per_call_ms, 1e-3))))
    samples, deadline = [], time.perf_counter() + budget_s
    while len(samples) < 5 or (time.perf_counter() < deadline and len(samples) < 100):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(calls):
            fn(*args)
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) / calls)
    return {**summary(samples), "calls": calls, "loops": [round(ms, 6) for ms in samples]}


def _bench_cuda(fn: Callable, args, budget_s: float) -> dict:
    try:
        from triton.testing import do_bench
    except ImportError:  # a CUDA torch without triton: plain events, no L2 flush
        return _bench_events(fn, args, budget_s)
    import torch

    samples = do_bench(lambda: fn(*args), warmup=25, rep=int(budget_s * 1e3), return_mode="all")
    # do_bench's 244 MiB L2-flush buffer, freed, stays cached: a block a later call keeps (a
    # CUDA graph's, say) can split it, and empty_cache cannot free a split segment, so the
    # cell's memory figures would read the toolkit's timing as the model's fragmentation
    torch.cuda.empty_cache()
    return summary(list(samples))


def _bench_events(fn: Callable, args, budget_s: float) -> dict:
    import torch

    for _ in range(10):
        fn(*args)
    torch.cuda.synchronize()
    samples, deadline = [], time.perf_counter() + budget_s
    while len(samples) < 10 or (time.perf_counter() < deadline and len(samples) < 1000):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn(*args)
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end))
    return summary(samples)
