"""A timeline of one forward's CUDA memory: the allocator's history of the forward
(torch.cuda.memory._record_memory_history), kept as a snapshot PyTorch's memory_viz opens,
read into allocated and reserved memory over the forward and the largest tensors live at its
peak, each named by the op and the source line that made it (docs/memory.md).

Recorded after the timed calls and the allocator's figures, so that no figure is touched:
the history's stacks cost host time in every allocation.
"""

from __future__ import annotations

import functools
import linecache
import os
import pickle
import re

from compilekit.model.errors import UserError

MB = 2**20
SNAPSHOT = "memory_snapshot.pickle"
TIMELINE = "memory_timeline.json"
MAX_EVENTS = 200_000  # the history's ring, in allocator events: the forward's most recent
MAX_POINTS = 400  # the run page's curve: the peak always among them
TOP = 10
CPU_REFUSAL = (
    "{run} ran on the CPU: a memory timeline records the CUDA caching allocator "
    "(torch.cuda.memory._record_memory_history); run the cell with --device cuda"
)
# the output code's own allocations and calls (Inductor's Python wrapper)
WRAPPER_ALLOC_RE = re.compile(r"^\s*(?P<buf>buf\d+) = empty_strided\w*\(")
WRAPPER_CALL_RE = re.compile(
    r"(?P<kernel>\b(?:triton|cpp)_\w+)(?:\.run)?\("
    r"|extern_kernels\.(?P<extern>\w+)\("
    r"|torch\.ops\.(?:aten\.)?(?P<op>[\w.]+?)(?:\.default)?\("
)
CALL_DEF_RE = re.compile(r"^\s*def call\((?:self, )?args\)")
GROW = ("alloc",)
SHRINK = ("free_completed",)
RESERVE = ("segment_alloc", "segment_map")
RELEASE = ("segment_free", "segment_unmap")


def record_forward(fn, args, path: str) -> tuple[list[dict], dict]:
    """fn(*args) once on CUDA, from an emptied cache, under the allocator's history with
    Python stacks; the snapshot pickled to path. Returns (the forward's events, what was
    allocated and reserved before it, in bytes)."""
    import torch

    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    before = {"allocated": torch.cuda.memory_allocated(), "reserved": torch.cuda.memory_reserved()}
    torch.cuda.memory._record_memory_history(stacks="python", max_entries=MAX_EVENTS)
    try:
        out = fn(*args)
        torch.cuda.synchronize()
        del out  # its free is part of the forward as a caller sees it
        snapshot = torch.cuda.memory._snapshot()
    finally:
        torch.cuda.memory._record_memory_history(enabled=None)
    with open(path, "wb") as f:
        pickle.dump(snapshot, f)
    return snapshot["device_traces"][torch.cuda.current_device()], before


def curve(events: list[dict], allocated: int, reserved: int) -> list[tuple[int, int]]:
    """(allocated, reserved) bytes before the first event and after each one."""
    points = [(allocated, reserved)]
    for e in events:
        size, action = e.get("size", 0), e["action"]
        allocated += size if action in GROW else -size if action in SHRINK else 0
        reserved += size if action in RESERVE else -size if action in RELEASE else 0
        points.append((allocated, reserved))
    return points


def live_at(events: list[dict], point: int) -> list[dict]:
    """The allocations made in the trace and not yet freed at curve point `point` (after
    events[:point]), largest first."""
    live = {}
    for e in events[:point]:
        if e["action"] in GROW:
            live[e["addr"]] = e
        elif e["action"] in SHRINK:
            live.pop(e["addr"], None)
    return sorted(live.values(), key=lambda e: -e["size"])


def _is_output_code(lines: list[str]) -> bool:
    calls = any(CALL_DEF_RE.match(t) for t in lines)  # a function, or Runner.call (partitions)
    return calls and any("torch._inductor" in t for t in lines)


def _call_key(text: str) -> str | None:
    m = WRAPPER_CALL_RE.search(text)
    return (m["kernel"] or m["extern"] or m["op"]) if m else None


@functools.lru_cache(maxsize=64)
def _output_code_calls(path: str) -> tuple | None:
    """Each line's call key (None for a line without one) of Inductor's output code at path,
    read once per file however many tensors it made; None for any other file."""
    lines = linecache.getlines(path)
    return tuple(_call_key(t) for t in lines) if _is_output_code(lines) else None


def wrapper_call(path: str, lineno: int) -> tuple[str, int] | None:
    """(the provenance key of the call in Inductor's output code that made the tensor
    allocated at path:lineno, how many calls of that key come before it in the file: its index
    among the key's sites): the line itself where it is a call (an extern op's output), else
    the first later call that takes the buffer. None outside output code."""
    calls = _output_code_calls(path)
    if calls is None or not 0 < lineno <= len(calls):
        return None
    lines = linecache.getlines(path)
    at = lineno - 1
    if alloc := WRAPPER_ALLOC_RE.match(lines[at]):
        buf = re.compile(rf"\b{alloc['buf']}\b")
        at = next((i for i in range(lineno, len(lines)) if calls[i] and buf.search(lines[i])),
                  None)  # fmt: skip
        if at is None:
            return None
    key = calls[at]
    return (key, calls[:at].count(key)) if key else None


def site(frames: list[dict], by_provenance: dict, eager_ops: dict) -> dict:
    """{"op", "file", "line", "code"} for one allocation from its Python frames (innermost
    first): in compiled code, the kernel or op of the output code that wrote it, with the
    kernel map's source line for it; in eager code, the innermost line of the user's (a
    model's own modeling file first), with the op the kernel map places there."""
    from compilekit.evidence.frames import is_user_file, origin

    user = []
    for f in frames:
        found = wrapper_call(f["filename"], f["line"]) if f["filename"].endswith(".py") else None
        if found:
            key, n = found
            sites = by_provenance.get(key) or [{}]
            rec = sites[min(n, len(sites) - 1)]
            line = (rec.get("origin_lines") or rec.get("source_lines") or [{}])[0]
            return {"op": ", ".join(rec.get("aten_ops") or [key]), **_where(line)}
        if is_user_file(f["filename"]):
            code = linecache.getline(f["filename"], f["line"]).strip()
            user.append({"file": f["filename"], "line": f["line"], "code": code})
    line = (origin(user) or [{}])[0]
    return {"op": eager_ops.get((line.get("file"), line.get("line")), ""), **_where(line)}


def _where(line: dict) -> dict:
    return {"file": line.get("file", ""), "line": line.get("line"), "code": line.get("code", "")}


def summarize(events: list[dict], before: dict, records: list[dict], graphs: dict) -> dict:
    """memory_timeline.json: the curve (at most MAX_POINTS points, the peak kept), the peaks,
    and the largest tensors live at the peak, each and summed by source line."""
    from compilekit.evidence.kernelmap import provenance_index

    by_provenance = {}
    for graph in graphs.values():
        by_provenance.update(provenance_index(graph))
    eager_ops = {}
    for rec in records:  # an eager kernel's line: where its op was called from
        for ln in (rec.get("origin_lines") or []) + (rec.get("source_lines") or []):
            eager_ops.setdefault((ln["file"], ln["line"]), ", ".join(rec["aten_ops"]))
    points = curve(events, before["allocated"], before["reserved"])
    peak = max(range(len(points)), key=lambda i: points[i][0])
    step = max(1, len(points) // MAX_POINTS)
    kept = sorted(set(range(0, len(points), step)) | {peak, len(points) - 1})
    largest = []
    for e in live_at(events, peak):
        where = site(e.get("frames", []), by_provenance, eager_ops)
        largest.append({"mb": e["size"] / MB, **where})
    by_line: dict = {}
    for t in largest:
        row = by_line.setdefault((t["file"], t["line"]), {**t, "mb": 0.0, "tensors": 0})
        row["mb"] += t["mb"]
        row["tensors"] += 1
    return {
        "what": "one forward from an emptied cache, after the timed calls",
        "snapshot": SNAPSHOT,
        "events": len(events),
        "before_allocated_mb": before["allocated"] / MB,
        "before_reserved_mb": before["reserved"] / MB,
        "peak_allocated_mb": points[peak][0] / MB,
        "peak_reserved_mb": max(p[1] for p in points) / MB,
        "peak_event": peak,
        "points": [[i, points[i][0] / MB, points[i][1] / MB] for i in kept],
        "largest_at_peak": largest[:TOP],
        "live_at_peak_mb": sum(t["mb"] for t in largest),
        "by_line_at_peak": sorted(by_line.values(), key=lambda r: -r["mb"])[:TOP],
    }


def load(run_dir: str, result) -> dict:
    """A run's memory_timeline.json; one line naming the fix where it has none."""
    from compilekit.model.store import kept, read_json

    if result.device != "cuda":
        raise UserError(CPU_REFUSAL.format(run=run_dir))
    path = kept(os.path.join(run_dir, TIMELINE))  # a published cell's is gzipped
    if not os.path.isfile(path):
        why = (result.memory or {}).get("timeline_error")
        raise UserError(
            f"{run_dir} has no memory timeline"
            + (
                f" (its recording failed: {why})"
                if why
                else ": run the cell again with this compilekit"
            )
        )
    return read_json(path)
