"""Is a process's host speed set by the core it runs on? One measurement per process: a
pure-Python loop (CPU only) and a loop of tiny CUDA launches (host cost per launch).

dev/cpu_speed_probe.sh runs it pinned to each core in turn, unpinned, then on four cores
again; the H200's answer (2026-12-01) is in dev/results/h200/host_bound_timing/.
"""

import json
import os
import time

import torch


def py_loop_us() -> float:
    """The best of 5 rounds of 200,000 steps of a Python loop, in µs per step."""
    best = 1e9
    for _ in range(5):
        start, total = time.perf_counter(), 0
        for i in range(200_000):
            total += i * i
        best = min(best, (time.perf_counter() - start) * 1e6 / 200_000)
    return best


def launch_us() -> float:
    """The host's cost of one tiny CUDA launch: the middle of 5 loops of 2,000 launches."""
    a, b = torch.ones(64, device="cuda"), torch.ones(64, device="cuda")
    for _ in range(200):
        torch.add(a, b)
    torch.cuda.synchronize()
    per_launch = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(2000):
            torch.add(a, b)
        per_launch.append((time.perf_counter() - start) * 1e6 / 2000)
        torch.cuda.synchronize()
    return sorted(per_launch)[2]


if __name__ == "__main__":
    cpus = os.sched_getaffinity(0)
    print(
        json.dumps(
            {
                "affinity": sorted(cpus) if len(cpus) < 4 else "all",
                "cpu_now": os.sched_getcpu() if hasattr(os, "sched_getcpu") else None,
                "py_loop_ns": round(py_loop_us() * 1000, 1),
                "launch_us": round(launch_us(), 2),
            }
        )
    )
