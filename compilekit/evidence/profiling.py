"""Torch.profiler over a schedule, as the blog does, reduced to what the map needs.

Writes into the run directory: trace.json (chrome trace, opens in Perfetto), profile.txt (the
profiler's own table) and returns the op cost matrix and the kernels of one forward.
"""

from __future__ import annotations

import math
import os
import re
import statistics
from collections.abc import Callable

import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile, record_function, schedule

from compilekit.evidence import partial, stepwindows
from compilekit.evidence.codecost import SDPA_CAUSAL_AT, attention_flops
from compilekit.evidence.kernelmap import NO_OP

WAIT, WARMUP, ACTIVE = 1, 2, 5
# Frames torch.compile wraps around the real work; on CPU we descend through them to the kernels.
# RECORDER: the range a Python dispatch mode (eagerlines' recorder) puts around an op.
RECORDER = "PythonDispatchMode"
WRAPPER_RE = re.compile(
    r"^(Torch-Compiled Region|TorchDynamo Cache Lookup|## |AOTDispatcher|"
    rf"CompiledFunction|Pregraph|Inductor|cudagraph|CUDAGraph|## Call|{RECORDER}$)"
)
CPU_KERNEL_RE = re.compile(r"^graph_\d+_(cpp_\w+)$")


def activities(device: str) -> list:
    """What the profiler records: the CPU, and the GPU's kernels on a CUDA device."""
    return [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])


def profiled_steps(fn: Callable, args, label: str, device: str, **options):
    """The profile (torch.profiler.profile with `options`) of WAIT+WARMUP+ACTIVE steps of
    fn(*args), each step labelled `label`."""
    with profile(
        activities=activities(device),
        schedule=schedule(wait=WAIT, warmup=WARMUP, active=ACTIVE),
        **options,
    ) as prof:
        for _ in range(WAIT + WARMUP + ACTIVE):
            with record_function(label):
                fn(*args)
            if device == "cuda":
                torch.cuda.synchronize()
            prof.step()
    return prof


def run_profiler(fn: Callable, args, label: str, device: str, run_dir: str):
    """profiled_steps of fn(*args) with the launching ops' shapes and FLOPs; writes trace.json
    and profile.txt into run_dir."""
    prof = profiled_steps(
        fn,
        args,
        label,
        device,
        record_shapes=True,  # the launching ops' tensor sizes: bytes moved, for the roofline
        with_flops=True,  # torch's FLOP count of the matmuls that launched kernels
    )
    prof.export_chrome_trace(os.path.join(run_dir, "trace.json"))
    sort_by = "self_device_time_total" if device == "cuda" else "self_cpu_time_total"
    with open(os.path.join(run_dir, "profile.txt"), "w") as f:
        f.write(prof.key_averages().table(sort_by=sort_by, row_limit=30))
    return prof


def _cpu_kernels(event, out: list) -> None:
    """Leaves of the work under a step label: aten ops and Inductor's C++ kernels."""
    for child in event.cpu_children:
        if (
            CPU_KERNEL_RE.match(child.name)
            or child.name.startswith("aten::")
            or (not child.cpu_children and not WRAPPER_RE.match(child.name))
        ):
            out.append(child)
        else:
            _cpu_kernels(child, out)


# Bytes per element of the dtype names the profiler records (record_shapes).
DTYPE_BYTES = {
    "double": 8,
    "long int": 8,
    "c10::complex<float>": 8,
    "float": 4,
    "int": 4,
    "c10::BFloat16": 2,
    "c10::Half": 2,
    "short int": 2,
    "bool": 1,
    "signed char": 1,
    "unsigned char": 1,
    "c10::Float8_e4m3fn": 1,
    "c10::Float8_e5m2": 1,
}
# Ops whose output the profiler does not list among the inputs: (op, inputs) -> output dims.
MATMUL_OUT = {
    "aten::mm": lambda a, b: a[:-1] + b[-1:],
    "aten::bmm": lambda a, b: a[:-1] + b[-1:],
}
# The ops inside an SDPA op that launch its kernel on CUDA (their own arguments carry no
# is_causal where the SDPA op's does; their first three tensors are q, k and v all the same)
SDPA_INNER = (
    "aten::_flash_attention_forward",
    "aten::_efficient_attention_forward",
    "aten::_cudnn_attention_forward",
)


def _sdpa_causal_at(name: str) -> int | None:
    """Where an SDPA op's is_causal stands (codecost.SDPA_CAUSAL_AT), by its profiler name."""
    return SDPA_CAUSAL_AT.get(name.removeprefix("aten::"))


def launcher_bytes(event, default_itemsize: int) -> int | None:
    """Bytes of the tensors the launching op reads and writes, from its recorded shapes: at
    least the traffic of its kernel (each tensor once; a Triton launch records only some of its
    arguments). None when nothing was recorded (a CUDA-graph replay launches its kernels without
    per-kernel arguments). Where the profiler records no dtypes (torch 2.11's FunctionEvent has
    none), every tensor counts `default_itemsize` bytes per element (the cell's dtype). An op
    that touches part of a tensor (an embedding's table) counts that part
    (partial.eager_touched)."""
    shapes = list(getattr(event, "input_shapes", None) or [])
    dtypes = getattr(event, "input_dtypes", None)
    if dtypes is None:
        sizes = [default_itemsize if dims else None for dims in shapes]
    else:
        sizes = [DTYPE_BYTES.get(dtype) for dtype in dtypes]
    concrete = getattr(event, "concrete_inputs", None) or []
    touched = partial.eager_touched(event.name, shapes, concrete)
    if touched:  # a gather's table, a cache written in place: the part it touches, and its output
        shapes[0] = [touched[0]]
        if touched[1]:
            sizes = [*sizes, *[None] * (len(shapes) - len(sizes)), sizes[0]]
            shapes.append([touched[1]])
    tensors = [
        (dims, size)
        for dims, size in zip(shapes, sizes)
        if isinstance(dims, list) and dims and size
    ]
    if not tensors:
        return None
    out = MATMUL_OUT.get(event.name)
    if out and len(tensors) == 2:  # eager mm/bmm: the output is allocated inside
        tensors.append((out(tensors[0][0], tensors[1][0]), tensors[0][1]))
    sdpa = _sdpa_causal_at(event.name) is not None or event.name in SDPA_INNER
    if sdpa and len(tensors) >= 3:  # so is SDPA's: q x v
        tensors.append((tensors[0][0][:-1] + tensors[2][0][-1:], tensors[0][1]))
    return sum(math.prod(dims) * size for dims, size in tensors)


def op_flops(event, device: str) -> int | None:
    """FLOPs of the work a launching op did: torch's count (matmuls; on a CPU, where the op is
    the outermost aten op of its work, summed over the ops inside it: aten::linear's addmm,
    aten::matmul's bmm), else an SDPA op's attention (sdpa_flops); None where neither counts.
    (On CUDA the launching op is the innermost, and ops inside it launch kernels of their own.)"""
    inside = _descendants(event) if device != "cuda" else []
    counted = sum(getattr(e, "flops", 0) or 0 for e in (event, *inside))
    return counted or sdpa_flops(event)


def sdpa_flops(event) -> int | None:
    """FLOPs of an SDPA op that launches one attention kernel (codecost.SDPA_CAUSAL_AT, or the
    op inside it that does: SDPA_INNER), from its recorded q and k shapes and its is_causal
    argument (codecost.attention_flops). None where the profiler recorded neither (a nested
    tensor, a torch without concrete inputs)."""
    if event.name in SDPA_INNER:  # the kernel's launcher on CUDA: its SDPA op knows the call
        event = getattr(event, "cpu_parent", None) or event
    at = _sdpa_causal_at(event.name)
    shapes = getattr(event, "input_shapes", None) or []
    concrete = getattr(event, "concrete_inputs", None) or []
    if at is None or len(shapes) < 2 or len(concrete) <= at:
        return None
    return attention_flops(shapes[0], shapes[1], concrete[at])


def _descendants(event) -> list:
    out = []
    for child in event.cpu_children:
        out.append(child)
        out += _descendants(child)
    return out


def recorder_us(events) -> float:
    """The CPU time (us) of the line recorder's own Python among events (its RECORDER ranges'
    self time): on a CPU an op's time is its kernel's, and the recorder's stack walks, 20
    times the ops' own time in a transformers forward, would be charged to the ops they wrap."""
    return sum(e.self_cpu_time_total for e in events if e.name == RECORDER)


def _step_launches(step, device: str) -> list[tuple[str, object, float]]:
    """(kernel, launching op event, ms) in launch order for one profiled step.

    On CUDA the profiler links each kernel to the innermost CPU op that launched it (by
    correlation id), so two bmm calls stay apart even when cuBLAS picks the same kernel.
    """
    if device != "cuda":
        leaves: list = []
        _cpu_kernels(step, leaves)
        own_us = lambda e: e.cpu_time_total - recorder_us(_descendants(e))  # noqa: E731
        return [(CPU_KERNEL_RE.sub(r"\1", e.name), e, own_us(e) / 1e3) for e in leaves]
    ops = sorted((e for e in _descendants(step) if e.kernels), key=lambda e: e.time_range.start)
    return [(k.name, e, k.duration / 1e3) for e in ops for k in e.kernels]


def _indexed(launches) -> list[tuple[str, str, int, object, float, list]]:
    """(kernel, launcher name, launcher_index, launcher event, ms, outer): launcher_index
    counts the earlier calls of an op of the same name in the step (the second bmm is 1);
    outer, the ATen ops around the launcher, innermost first, each [name, index] counted the
    same way (masked_fill's copy_ and masked_fill_ launch its kernels: [["aten::clone", 0],
    ["aten::masked_fill", 0]] for the copy's)."""
    instances: dict[str, list] = {}

    def index_of(op) -> int:
        seen = instances.setdefault(op.name, [])
        if not any(op is e for e in seen):
            seen.append(op)
        return next(i for i, e in enumerate(seen) if e is op)

    out = []
    for name, op, ms in launches:
        index = index_of(op)
        outer, parent = [], getattr(op, "cpu_parent", None)
        while parent is not None and parent.name.startswith("aten::"):
            outer.append([parent.name, index_of(parent)])
            parent = getattr(parent, "cpu_parent", None)
        out.append((name, op.name, index, op, ms, outer))
    return out


def _add_step(step, device: str, itemsize: int, per_key: dict) -> int:
    """Add one profiled step's launches to per_key ({(name, launcher, index): record}, each
    record's samples_ms growing by one); returns how many launches it had."""
    launches = _indexed(_step_launches(step, device))
    # an op's tensors and FLOPs are its main kernel's (the longest it launched), not those
    # of the memset or split-K reduction beside it: cuDNN's 0.7 us memset was credited the
    # attention's 50 MB (71 TB/s)
    longest: dict[int, int] = {}  # op -> the position of its longest launch (the first)
    for at, (_, _, _, op, ms, _) in enumerate(launches):
        if id(op) not in longest or ms > launches[longest[id(op)]][4]:
            longest[id(op)] = at
    # A compiled region's CUDA-graph replay launches every kernel of the graph (a BERT's 48
    # GEMMs of one cuBLAS name) from the one region op: each launch keeps its place among its
    # name's, so that the map can give the n-th its own call site. An ATen op's repeats of a
    # kernel (a foreach op's chunks) stay one record.
    seen: dict[tuple[int, str], int] = {}
    for at, (name, launcher, index, op, ms, outer) in enumerate(launches):
        main = longest[id(op)] == at
        nth = seen.get((id(op), name), 0) if not launcher.startswith("aten::") else 0
        seen[(id(op), name)] = nth + 1
        rec = per_key.setdefault(
            (name, launcher, index, nth),
            {
                "name": name,
                "launcher": launcher,
                "launcher_index": index,
                **({"launch_in_op": nth} if nth else {}),
                "samples_ms": [],
                "bytes": launcher_bytes(op, itemsize) if main else None,
                "flops": op_flops(op, device) if main else None,
                **({"outer": outer} if outer else {}),
            },
        )
        rec["samples_ms"].append(ms)
    return len(launches)


def forward_kernels(prof, label: str, device: str, itemsize: int = 4) -> dict:
    """Kernels of one forward, in launch order, with per-call time and who launched them.

    Returns {"kernels": [{"name", "launcher", "launcher_index", "calls_per_forward",
    "device_ms", "bytes", "flops"}], "kernels_per_forward", "forward_device_ms" (busy time per
    forward), "forward_host_ms", "bytes_dtypes"}. `launcher_index` counts earlier launches by an
    op of the same name in the forward (the second bmm is 1); `launch_in_op`, where not 0, the
    earlier launches of the kernel by the same launcher, not an ATen op (a CUDA-graph replay's
    region launching one GEMM kernel 48 times). `bytes` and `flops` are the
    launching op's, given to the longest kernel it launched (see launcher_bytes, with
    `itemsize` bytes per element where the profiler records no dtypes, as `bytes_dtypes` says;
    flops only where torch counts them). Device time is a kernel's duration on the GPU, or its
    CPU time where the CPU is the device. Kernels no op launched (a raw Triton launch) come
    last, with launcher NO_OP (see stepwindows.unattached).
    """
    events = prof.events()
    steps = [e for e in events if e.name == label and e.device_type == DeviceType.CPU]
    n_steps = max(1, len(steps))
    per_key: dict[tuple, dict] = {}
    n_launches = sum(_add_step(step, device, itemsize, per_key) for step in steps)
    overlap = 0.0
    if device == "cuda":
        per_window = stepwindows.window_launches(events, label, WRAPPER_RE)
        overlap = stepwindows.overlap_ms(per_window)
        attached: dict[str, int] = {}
        for (name, *_), rec in per_key.items():
            attached[name] = attached.get(name, 0) + len(rec["samples_ms"])
        unclaimed = stepwindows.unattached(per_window, attached, n_steps)
        for (name, index), samples in unclaimed.items():
            per_key[(name, NO_OP, index, 0)] = {
                "name": name,
                "launcher": NO_OP,
                "launcher_index": index,
                "samples_ms": samples,
                "bytes": None,
                "flops": None,
            }
            n_launches += len(samples)
    # Medians, not means: one slow step (a page fault, a preempted core) should not own the map.
    kernels = [
        {
            "name": r["name"],
            "launcher": r["launcher"],
            "launcher_index": r["launcher_index"],
            **({"launch_in_op": r["launch_in_op"]} if "launch_in_op" in r else {}),
            "calls_per_forward": len(r["samples_ms"]) / n_steps,
            "device_ms": statistics.median(r["samples_ms"]),
            "bytes": r["bytes"],
            "flops": r["flops"],
            **({"outer": r["outer"]} if "outer" in r else {}),
        }
        for r in per_key.values()
    ]
    return {
        "kernels": kernels,
        "kernels_per_forward": n_launches / n_steps,
        "forward_device_ms": sum(k["device_ms"] * k["calls_per_forward"] for k in kernels),
        # of which kernels ran at once (programmatic dependent launch): busy = device - overlap
        "forward_overlap_ms": overlap,
        # the same profiled steps' host time: on a CPU device the forward itself, measured in
        # the same window as its kernels; on a GPU the time to launch it
        "forward_host_ms": statistics.median(e.cpu_time_total / 1e3 for e in steps)
        if steps
        else 0.0,
        # torch 2.11's profiler events carry shapes but no dtypes: then `itemsize` stood in
        "bytes_dtypes": "recorded"
        if events and hasattr(events[0], "input_dtypes")
        else f"assumed {itemsize} bytes per element",
    }
