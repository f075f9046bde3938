"""The op cost matrix: every op a profile saw, with its time per forward and, from a profile of
its own, the bytes it allocated (`compilekit ops`, compilekit.profile())."""

from __future__ import annotations

from collections.abc import Callable

from compilekit.evidence import profiling
from compilekit.evidence.profiling import ACTIVE


def op_table(
    prof, device: str, memory_prof=None, steps: int = ACTIVE, label: str | None = None
) -> list[dict]:
    """The op cost matrix per forward (of `steps`): self and total device time, self CPU time,
    calls, share of the forward's time; with memory_prof (a profile_memory session, run apart so
    its allocator hooks never touch the timed profile), the bytes each op allocated itself, in
    MiB.
    The step markers, the `label` range around each forward and the line recorder's ranges
    (profiling.RECORDER: its own host time) are not ops."""
    skip = ("ProfilerStep*", label, profiling.RECORDER)
    rows = [(kind, a) for kind, a in _averages(prof) if a.key not in skip]
    key = "self_device_time_total" if device == "cuda" else "self_cpu_time_total"
    # the share of the forward's time: on CUDA, of its kernels' time (each kernel shows twice,
    # as its own row and in the self time of the op that launched it: count it once)
    kernels = [a for kind, a in rows if device == "cuda" and kind == "kernel"]
    total = sum(getattr(a, key) for a in kernels or [a for _, a in rows]) or 1.0
    memory = _memory_by_op(memory_prof, device, steps) if memory_prof is not None else {}
    table = [
        {
            "name": a.key,
            # a kernel (or a device copy) also counts in the self time of the op that launched it
            "kind": kind,
            "calls_per_forward": a.count / steps,
            "self_device_ms": a.self_device_time_total / 1e3 / steps,
            "device_ms": a.device_time_total / 1e3 / steps,
            "self_cpu_ms": a.self_cpu_time_total / 1e3 / steps,
            "share": getattr(a, key) / total,
            **({"allocated_mb": memory[a.key]} if kind == "op" and a.key in memory else {}),
        }
        for kind, a in rows
    ]
    return sorted(table, key=lambda r: -r["share"])


def _averages(prof) -> list[tuple[str, object]]:
    """(kind, average) per op and per kernel, as key_averages gives them, but
    - a kernel apart from a CPU range of the same name: Inductor records each Triton launch as
      a CPU range named after its kernel, and one average of both counted the kernel's calls
      and device time twice;
    - without the GPU-side copies of annotated ranges (Inductor's `## Call CompiledFxGraph`
      around a compiled graph, a user's record_function): on CUDA each such range also shows
      as a device event spanning its kernels, which would be counted as device time of its
      own, on top of the kernels it spans."""
    from torch.autograd import DeviceType
    from torch.autograd.profiler_util import FunctionEventAvg

    averages: dict[tuple[str, str], FunctionEventAvg] = {}
    for event in prof.events():
        if event.device_type == DeviceType.CPU:
            averages.setdefault((event.key, "op"), FunctionEventAvg()).add(event)
        elif not _annotation(event):
            averages.setdefault((event.key, "kernel"), FunctionEventAvg()).add(event)
    return [(kind, a) for (_, kind), a in averages.items()]


def _annotation(event) -> bool:
    """A device-side range a user or torch annotated, not a kernel or a copy."""
    return bool(getattr(event, "is_user_annotation", False)) or event.name.startswith("## ")


def _memory_by_op(prof, device: str, steps: int) -> dict[str, float]:
    """{op: MiB it allocated itself per forward} (frees are not netted out: what an op asks
    the allocator for is what it costs)."""
    out = {}
    for a in prof.key_averages():
        allocated = a.self_device_memory_usage if device == "cuda" else a.self_cpu_memory_usage
        if a.key != "ProfilerStep*" and allocated > 0:
            out[a.key] = allocated / 2**20 / steps
    return out


def memory_profile(fn: Callable, args, label: str, device: str):
    """A profile_memory session of fn(*args) over the timing profile's schedule, for
    op_table's memory; nothing is written."""
    return profiling.profiled_steps(fn, args, label, device, profile_memory=True)
