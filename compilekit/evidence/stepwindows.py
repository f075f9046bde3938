"""The kernels that ran inside each profiled step's GPU-side range, whoever launched them: the
ones no op claims (a raw Triton launch, a CUDA graph's replay), and how long kernels overlapped."""

from __future__ import annotations

import math
import re
import statistics

from torch.autograd import DeviceType


def window_launches(events, label: str, wrappers: re.Pattern) -> list[list[tuple]]:
    """[(start us, end us, kernel), ...] per GPU-side range of the `label` steps: every kernel
    that ran inside a step's `record_function` range on the device, claimed by an op or not."""
    windows = [e.time_range for e in events if e.name == label and e.device_type != DeviceType.CPU]
    per_window: list[list] = [[] for _ in windows]
    for e in events:
        if (
            e.device_type == DeviceType.CPU
            or e.name == label
            or getattr(e, "is_user_annotation", False)
            or e.name.startswith("ProfilerStep")
            or wrappers.match(e.name)  # torch.compile's own record_function ranges
        ):
            continue
        start, end = e.time_range.start, e.time_range.end
        for launches, w in zip(per_window, windows):
            if w.start <= start and end <= w.end:
                launches.append((start, end, e.name))
                break
    return per_window


def overlap_ms(per_window: list[list[tuple]]) -> float:
    """The median over steps of the kernels' summed durations less the time any kernel ran
    (their union), in ms: 0 where one ran at a time. A kernel launched with programmatic
    dependent launch starts while the one before it finishes and waits for it, so its duration
    counts time another kernel's already does."""
    overlaps = []
    for launches in per_window:
        summed = union = 0.0
        reach = -math.inf
        for start, end, _ in sorted(launches):
            summed += end - start
            union += max(0.0, end - max(start, reach))
            reach = max(reach, end)
        overlaps.append((summed - union) / 1e3)
    return statistics.median(overlaps) if overlaps else 0.0


def unattached(per_window: list[list[tuple]], attached: dict[str, int], n_steps: int) -> dict:
    """{(kernel, n): [ms, ...]}: the kernels that ran inside the GPU-side ranges of the steps
    (per_window, from window_launches) beyond those an op claimed (`attached`: launches per
    kernel name in those steps), the n-th launch of a name in a step apart from its others, in
    launch order.

    The profiler links a kernel to the CPU op that launched it; a raw Triton launch
    (`kernel[grid](...)`, or a compiled kernel's runner) goes through no torch op, nor does a
    kernel a CUDA graph replays, so no op lists it, and the map and the GPU-busy share would
    miss it. The step's `record_function` still gets a GPU-side range spanning the kernels
    launched inside it: what ran there is counted. Each launch keeps its place, so the map can
    give a replay's n-th GEMM the graph's n-th GEMM call site (kernelmap._replayed_site).
    """
    out: dict[tuple[str, int], list[float]] = {}
    for launches in per_window:
        counts: dict[str, int] = {}
        for start, end, name in sorted(launches, key=lambda x: x[0]):
            ms = (end - start) / 1e3
            counts[name] = counts.get(name, 0) + 1
            out.setdefault((name, counts[name] - 1), []).append(ms)
    # which of a name's launches an op claimed cannot be told, only how many: the last go
    per_step = {name: round(n / n_steps) for name, n in attached.items()}
    last = {}
    for name, n in out:
        last[name] = max(last.get(name, -1), n)
    return {
        (name, n): ms for (name, n), ms in out.items() if n <= last[name] - per_step.get(name, 0)
    }
