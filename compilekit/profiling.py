"""Step 6: torch.profiler over a schedule, as the blog does, reduced to what the map needs.

Writes into the run directory: trace.json (chrome trace, opens in Perfetto), profile.txt (the
profiler's own table) and returns the op cost matrix and the kernels of one forward.
"""

from __future__ import annotations

import os
import re
from typing import Callable

import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile, record_function, schedule

WAIT, WARMUP, ACTIVE = 1, 1, 3
# Frames torch.compile wraps around the real work; on CPU we descend through them to the kernels.
WRAPPER_RE = re.compile(r"^(Torch-Compiled Region|TorchDynamo Cache Lookup|## |AOTDispatcher|"
                        r"CompiledFunction|Pregraph|Inductor|cudagraph|CUDAGraph|## Call)")
CPU_KERNEL_RE = re.compile(r"^graph_\d+_(cpp_\w+)$")


def run_profiler(fn: Callable, args, label: str, device: str, run_dir: str,
                 with_memory: bool = False):
    """Profile WAIT+WARMUP+ACTIVE steps of fn(*args), each step labelled `label`."""
    activities = [ProfilerActivity.CPU]
    if device == "cuda":
        activities.append(ProfilerActivity.CUDA)
    steps = WAIT + WARMUP + ACTIVE
    with profile(activities=activities, schedule=schedule(wait=WAIT, warmup=WARMUP, active=ACTIVE),
                 profile_memory=with_memory) as prof:
        for _ in range(steps):
            with record_function(label):
                fn(*args)
            if device == "cuda":
                torch.cuda.synchronize()
            prof.step()
    prof.export_chrome_trace(os.path.join(run_dir, "trace.json"))
    sort_by = "self_device_time_total" if device == "cuda" else "self_cpu_time_total"
    with open(os.path.join(run_dir, "profile.txt"), "w") as f:
        f.write(prof.key_averages().table(sort_by=sort_by, row_limit=30))
    return prof


def op_table(prof, device: str) -> list[dict]:
    """The op cost matrix per forward: self device and CPU time, calls, share of the total."""
    rows = [a for a in prof.key_averages() if a.key != "ProfilerStep*"]
    key = "self_device_time_total" if device == "cuda" else "self_cpu_time_total"
    total = sum(getattr(a, key) for a in rows) or 1.0
    table = [{"name": a.key, "calls_per_forward": a.count / ACTIVE,
              "self_device_ms": a.self_device_time_total / 1e3 / ACTIVE,
              "self_cpu_ms": a.self_cpu_time_total / 1e3 / ACTIVE,
              "share": getattr(a, key) / total,
              **({"cpu_memory_mb": a.self_cpu_memory_usage / 2**20 / ACTIVE} if a.cpu_memory_usage
                 else {})} for a in rows]
    return sorted(table, key=lambda r: -r["share"])


def _cpu_kernels(event, out: list) -> None:
    """Leaves of the work under a step label: aten ops and Inductor's C++ kernels."""
    for child in event.cpu_children:
        if CPU_KERNEL_RE.match(child.name) or child.name.startswith("aten::") or (
                not child.cpu_children and not WRAPPER_RE.match(child.name)):
            out.append(child)
        else:
            _cpu_kernels(child, out)


def forward_kernels(prof, label: str, device: str) -> dict:
    """Kernels of one forward, in launch order, with per-call time and who launched them.

    Returns {"kernels": [{"name", "launcher", "calls_per_forward", "device_ms"}],
    "forward_device_ms": device busy time per forward, "forward_cpu_ms": CPU time per forward}.
    Device time is a kernel's duration on the GPU, or its CPU time where the CPU is the device.
    """
    events = prof.events()
    steps = [e for e in events if e.name == label and e.device_type == DeviceType.CPU]
    forward_cpu_ms = sum(e.cpu_time_total for e in steps) / 1e3 / max(1, len(steps))
    launched: list[tuple[float, str, str, float]] = []  # (start, name, launcher, ms)
    if device == "cuda":
        launcher = {}
        for e in events:
            for k in e.kernels:
                launcher.setdefault(k.name, e.name)
        for e in events:
            if e.device_type == DeviceType.CUDA and not e.is_user_annotation and e.name != label:
                ms = (e.time_range.end - e.time_range.start) / 1e3
                launched.append((e.time_range.start, e.name, launcher.get(e.name, ""), ms))
    else:
        for step in steps:
            leaves: list = []
            _cpu_kernels(step, leaves)
            launched += [(e.time_range.start, CPU_KERNEL_RE.sub(r"\1", e.name), e.name,
                          e.cpu_time_total / 1e3) for e in leaves]
    launched.sort()
    per_name: dict[str, dict] = {}
    for _, name, who, ms in launched:
        rec = per_name.setdefault(name, {"name": name, "launcher": who, "count": 0, "total_ms": 0.0})
        rec["count"] += 1
        rec["total_ms"] += ms
    n_steps = max(1, len(steps))
    kernels = [{"name": r["name"], "launcher": r["launcher"],
                "calls_per_forward": r["count"] / n_steps, "device_ms": r["total_ms"] / r["count"]}
               for r in per_name.values()]
    return {"kernels": kernels, "kernels_per_forward": len(launched) / n_steps,
            "forward_device_ms": sum(ms for *_, ms in launched) / n_steps,
            "forward_cpu_ms": forward_cpu_ms}
