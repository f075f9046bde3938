"""Why the fast path was or was not taken.

Graph breaks, recompiles, CUDA graphs skipped (with torch's own reason), the SDPA backend that
actually ran, and which Inductor pattern rewrites fired.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import sys

SDPA_BACKENDS = (
    ("cudnn", "cudnn"),
    ("flash", "flash"),
    ("fmha", "efficient"),
    ("efficient", "efficient"),
    ("_scaled_dot_product_attention_math", "math"),
    ("math", "math"),
)

# Under this share of each call busy on the GPU, the call is host-bound...
HOST_BOUND_SHARE = 0.8
# ...if the host can be what paces the loop: issuing a call takes at least this share of the
# loop's time per call (half: the two are timed at different moments, and a host's speed moves).
# The profile's device time comes from a short run, at the clock a GPU holds for a moment; a
# long loop of long kernels can run at a power-capped clock and read under 80% busy while the
# host issues each call in a fifth of the loop's time.
HOST_PACED_SHARE = 0.5


def busy_share(
    device_ms: float, loop_ms: float, host_ms: float | None = None
) -> tuple[float, bool]:
    """(the share of each call the GPU is busy, host-bound?) from the device time per forward
    and a user's loop's time per call. Not do_bench's figure: its L2 flush gives the host a
    head start that hides up to the flush's GPU time of host cost per call. Host-bound also
    needs the host's time to issue a call (host_ms, where measured) to be half the loop's or
    more (HOST_PACED_SHARE): a GPU idle while the host is far ahead is not waiting for it."""
    share = min(1.0, device_ms / loop_ms)
    paced = host_ms is None or host_ms >= HOST_PACED_SHARE * loop_ms
    return share, share < HOST_BOUND_SHARE and paced


def busy_ms(result) -> float | None:
    """The profiled time per forward during which any kernel ran: the kernels' summed device
    time less what ran at once (programmatic dependent launch), counted once."""
    device_ms = result.profiled_forward_device_ms
    if device_ms is None:
        return None
    return device_ms - (result.profiled_forward_overlap_ms or 0.0)


def judge_host_bound(result) -> None:
    """Set a CUDA cell's gpu_busy_share and host_bound (busy_share) from its record's profiled
    device time, loop time and host time per call, where it has the first two: at measure time
    and again when a sweep is published, from the same stored figures."""
    device_ms, loop_ms = busy_ms(result), result.compiled_loop_ms
    if result.device == "cuda" and loop_ms and device_ms is not None:
        result.gpu_busy_share, result.host_bound = busy_share(
            device_ms, loop_ms, result.host_ms_per_call
        )


def judge_attention_rewrite(result, records: list[dict]) -> None:
    """Set a compiled cell's attention_rewrite note (attention_rewrite) from its Dynamo counters
    and kernel map `records`: at measure time and again when a sweep is published."""
    if result.mode != "eager":
        result.attention_rewrite = attention_rewrite(
            result.dynamo or {}, records, tuple(result.passes)
        )


class _Collect(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record):
        self.messages.append(record.getMessage())


@contextlib.contextmanager
def cudagraph_skip_reasons():
    """Collect torch's 'skipping cudagraphs due to ...' messages, which it logs and then hides.

    Yields the list the messages land in. The logger is restored on exit.
    """
    import torch._inductor.cudagraph_utils as cg

    logger = cg.cudagraphs_log
    handler = _Collect()
    saved = (logger.disabled, logger.level)
    logger.disabled = False
    logger.setLevel(logging.DEBUG)
    logger.addHandler(handler)
    try:
        yield handler.messages
    finally:
        logger.removeHandler(handler)
        logger.disabled = saved[0]
        logger.setLevel(saved[1])  # not `.level =`: that would keep the DEBUG answers cached


def dynamo_counters() -> dict:
    """Graph breaks, compiled frames and Inductor counters from torch._dynamo.utils.counters;
    recompiles and their reasons from Dynamo's compilation metrics (torch writes no counter
    for them)."""
    from torch._dynamo.utils import counters

    return {
        "graph_breaks": dict(counters["graph_break"]),
        "unique_graphs": counters["stats"].get("unique_graphs", 0),
        "calls_captured": counters["stats"].get("calls_captured", 0),
        "recompiles": recompile_reasons(),
        "recompile_limit_hit": recompile_limit_hit(),
        "inductor": {k: v for k, v in counters["inductor"].items() if v},
    }


def recompile_reasons() -> list[str]:
    """Why Dynamo compiled a frame again, one entry per recompile, in torch's words."""
    from torch._dynamo.utils import get_compilation_metrics

    reasons = []
    for metrics in get_compilation_metrics():
        recompile = getattr(metrics, "recompile_reason", None)
        if recompile:  # "0/0: n == 2     # file:3 in f\nUser stack trace: ...": its first line
            reasons.append(re.sub(r"\s+", " ", str(recompile).strip().splitlines()[0]))
    return reasons


def recompile_limit_hit() -> list[str]:
    """The functions Dynamo stopped compiling at its recompile limit, `name (file:line)` with
    the line of the guard that failed last: a call that matches none of their compiled
    versions runs them eagerly, so a figure taken after that is partly eager whatever the
    mode."""
    from torch._dynamo.utils import get_compilation_metrics

    hit = []
    for metrics in get_compilation_metrics():
        if "recompile limit" not in str(getattr(metrics, "fail_reason", None) or "").lower():
            continue
        # torch leaves the code's name empty here; the last guard's source line names it
        reason = str(getattr(metrics, "recompile_reason", None) or "").split("\n")[0]
        where = re.search(r"(\S+):(\d+) in (\S+)\s*$", reason)
        frame = getattr(metrics, "compile_id", None) or "?"
        name = (
            f"{where[3]} ({os.path.basename(where[1])}:{where[2]})" if where else f"frame {frame}"
        )
        if name not in hit:
            hit.append(name)
    return hit


def recompile_limit_note(hit: list[str] | None) -> str | None:
    """The cell's line for recompile_limit_hit, or None."""
    if not hit:
        return None
    return (
        f"recompile limit hit: {', '.join(hit)} ran eagerly where no compiled version fit "
        "(torch._dynamo.config.recompile_limit; the recompiles' reasons name the value that "
        "changes): the compiled figure is partly eager"
    )


def sdpa_backend(kernel_records: list[dict], op_names: list[str] = ()) -> str | None:
    """The SDPA backend that ran, read off the kernels, their launching ops and the profiled op
    names (on CPU the backend shows only as a nested op); None if no SDPA ran."""
    names = " ".join(
        [f"{r['name']} {r['launcher']}" for r in kernel_records] + list(op_names)
    ).lower()
    # only SDPA's own op or kernels: a hand-written flash kernel (triton-flash) is not SDPA
    if "scaled_dot_product" not in names and not any(
        k in names for k in ("pytorch_flash::", "fmha", "cudnn")
    ):
        return None
    for needle, backend in SDPA_BACKENDS:
        if needle in names:
            return backend
    return "unknown"


def cudagraph_status(
    mode_uses_cudagraphs: bool, device: str, skips: int, reasons: list[str]
) -> dict:
    """Whether CUDA graphs were asked for, applied, and if not, torch's reason."""
    if not mode_uses_cudagraphs:
        return {"requested": False, "applied": False, "note": "mode does not use CUDA graphs"}
    if skips or reasons:
        reason = "; ".join(dict.fromkeys(reasons))
        if not reason and device != "cuda":
            # torch logs a reason only for CUDA graphs; off CUDA it just bumps a counter
            reason = (
                f"CUDA graphs capture CUDA work only; torch counted {skips} skip(s) in "
                "counters['inductor']['cudagraph_skips'] and logged nothing"
            )
        reason = reason or f"{skips} cudagraph skip(s) counted"
        return {
            "requested": True,
            "applied": False,
            "note": f"CUDA graphs requested but skipped on {device}: {reason}",
        }
    return {
        "requested": True,
        "applied": device == "cuda",
        "note": "CUDA graphs applied" if device == "cuda" else "no CUDA device",
    }


def attention_rewrite(dynamo: dict, kernel_records: list[dict], passes: tuple = ()) -> str | None:
    """Whether Inductor's fuse_attention pass turned a written-out attention into SDPA.

    Only asked where the compiled graph still holds the pattern (a matmul and a softmax);
    None otherwise. Where the cell ran no pass of its own, it names the one that ships.
    """
    fired = (dynamo.get("inductor") or {}).get("fuse_attention", 0)
    if fired:
        return f"Inductor's fuse_attention rewrite fired {fired} time(s): the pattern became SDPA"
    ops = {op for r in kernel_records for op in r.get("aten_ops") or ()}
    # attention's matmuls are batched over heads (q @ kT: bmm); a model's projections are mm
    has_matmul = any(op.endswith(("bmm", "matmul")) for op in ops)
    # softmax by its name: Inductor names a fused kernel by its source ops (`_softmax`,
    # `prepare_softmax_online`) where its decomposed ops keep only exp, which SiLU has too
    has_softmax = any("softmax" in r.get("name", "") for r in kernel_records) or any(
        op.endswith(("amax", "softmax")) for op in ops
    )
    if has_matmul and has_softmax:
        hint = "; `--pass naive-to-sdpa` rewrites its written-out forms into one SDPA"
        return (
            "Inductor's fuse_attention rewrite did not fire: the pattern stays matmul + "
            f"softmax + matmul (see kernels.json{'' if passes else hint})"
        )
    return None


def cudagraph_tree_stats(device_index: int = 0) -> dict | None:
    """Recordings and unexpected re-records of this process's CUDA-graph trees (torch keeps
    them on the tree manager; no counter); None where no tree exists."""
    try:
        from torch._inductor import cudagraph_trees

        manager = cudagraph_trees.get_container(device_index).tree_manager
    except Exception:  # noqa: BLE001 (internals that moved: the figure is then unknown)
        return None
    if manager is None:
        return None

    def count(nodes) -> int:
        return sum(1 + count([c for cs in n.children.values() for c in cs]) for n in nodes)

    roots = [node for nodes in (manager.roots or {}).values() for node in nodes]
    return {
        "recordings": count(roots),
        "rerecords": sum(n for per in manager.num_rerecord.values() for n in per.values()),
    }


# the ops cudagraph trees copy non-static inputs with, before each replay
COPY_LAUNCHERS = ("aten::copy_", "aten::_foreach_copy_")


def replay_breakdown(
    records: list[dict], host_ms: float | None, tree: dict | None, copies_recorded: int
) -> dict:
    """Where a CUDA-graph call's time goes: the inputs copied into the graph's buffers before
    each replay (torch's count of them; the copy kernels, their MiB where recorded, their GPU
    time from the kernel map), the GPU work inside the graph, and the host time per call against
    it; with the recordings and re-records.

    The copies run outside the graph, launched by `aten::copy_` (one memcpy per tensor) or by
    `aten::_foreach_copy_` (one multi-tensor kernel for several tensors, which records no
    shapes: no MiB then)."""
    copies = [r for r in records if r["launcher"] in COPY_LAUNCHERS]
    copy_ms = sum(r["device_ms"] * r["calls_per_forward"] for r in copies)
    total_ms = sum(r["device_ms"] * r["calls_per_forward"] for r in records)
    # copy_(dst, src) records both tensors: half the recorded bytes were copied
    copied = [r["bytes"] / 2 * r["calls_per_forward"] for r in copies if r.get("bytes")]
    launches = sum(r["calls_per_forward"] for r in copies)
    out = {
        "input_copy_launches_per_call": launches,
        "inputs_recorded_non_static": copies_recorded,
        "input_copy_mib": sum(copied) / 2**20 if copies and len(copied) == len(copies) else None,
        "input_copy_ms": copy_ms,
        "graph_gpu_ms": total_ms - copy_ms,
        "graph_share": (total_ms - copy_ms) / total_ms if total_ms else None,
        "host_ms_per_call": host_ms,
        **(tree or {}),
    }
    if copies:
        ops = ", ".join(sorted({r["launcher"].removeprefix("aten::") for r in copies}))
        mib = f", {out['input_copy_mib']:.1f} MiB" if out["input_copy_mib"] is not None else ""
        notes = [
            f"{copies_recorded} input(s) copied per call by {launches:g} kernel launch(es) "
            f"({ops}{mib}, {copy_ms:.4f} ms on the GPU, {copy_ms / total_ms:.0%} of its time)"
        ]
    else:
        notes = [f"no input copies seen ({copies_recorded} non-static input(s) recorded)"]
    if host_ms is not None:
        verdict = (
            "the replay path costs more host time than the graph's GPU work"
            if host_ms > out["graph_gpu_ms"]
            else "the GPU work outlasts the host's"
        )
        notes.append(
            f"host {host_ms:.4f} ms per call vs {out['graph_gpu_ms']:.4f} ms of GPU work in "
            f"the graph: {verdict}"
        )
    if tree:
        notes.append(f"{tree['recordings']} recording(s), {tree['rerecords']} re-record(s)")
    out["note"] = "CUDA graph: " + "; ".join(notes)
    return out


AUTOTUNE_HEAD_RE = re.compile(r"^AUTOTUNE (\w+)\((.*)\)$")
AUTOTUNE_CHOICE_RE = re.compile(r"^\s+(\S+) ([\d.]+|inf) ms (?:[\d.]+%|<[^>]*>) ?(.*)$")


def parse_autotune(text: str) -> list[dict]:
    """max-autotune's own tables, as torch prints them on stderr ("AUTOTUNE bmm(8x1024x64,
    ...)" then one line per choice, fastest first), as [{"op", "sizes", "choices": [{"name",
    "ms", "description"}], "winner", "margin"}]; margin is the runner-up's time over the
    winner's."""
    tuned: list[dict] = []
    for line in text.splitlines():
        if head := AUTOTUNE_HEAD_RE.match(line):
            tuned.append({"op": head[1], "sizes": head[2], "choices": []})
        elif tuned and (choice := AUTOTUNE_CHOICE_RE.match(line)):
            tuned[-1]["choices"].append(
                {"name": choice[1], "ms": float(choice[2]), "description": choice[3].strip()}
            )
    for op in tuned:
        ranked = op["choices"]
        op["winner"] = ranked[0]["name"] if ranked else None
        op["margin"] = (
            ranked[1]["ms"] / ranked[0]["ms"] if len(ranked) > 1 and ranked[0]["ms"] else None
        )
    return tuned


class _Tee:
    """A stream that writes through to `inner` and keeps a copy."""

    def __init__(self, inner):
        self.inner, self.parts = inner, []

    def write(self, text):
        self.parts.append(text)
        return self.inner.write(text)

    def __getattr__(self, name):
        return getattr(self.inner, name)


@contextlib.contextmanager
def autotune_choices():
    """Collect max-autotune's choices while compiling: yields a list that is filled, on exit,
    with parse_autotune of what torch wrote to stderr meanwhile (torch prints the tables there;
    a tee of sys.stderr imports and hooks nothing, so the cold compile it wraps stays a
    user's)."""
    tuned: list[dict] = []
    tee = _Tee(sys.stderr)
    sys.stderr = tee
    try:
        yield tuned
    finally:
        sys.stderr = tee.inner
        tuned.extend(parse_autotune("".join(tee.parts)))


def graph_breaks_text(breaks: dict) -> str:
    """'graph breaks (3): REASON (x2); REASON': each of Dynamo's reasons by its first line and
    its Explanation line (torch's message also has hints and a debug context: result.json keeps
    it whole), most frequent first."""
    parts = []
    for reason, count in sorted(breaks.items(), key=lambda kv: -kv[1])[:3]:
        lines = [ln.strip() for ln in str(reason).splitlines() if ln.strip()]
        why = [
            ln.removeprefix("Explanation:").strip()
            for ln in lines[1:]
            if ln.startswith("Explanation:")
        ]
        text = ": ".join(lines[:1] + why[:1])
        parts.append(text + (f" (x{count})" if count > 1 else ""))
    more = f"; and {len(breaks) - 3} more (result.json)" if len(breaks) > 3 else ""
    return f"graph breaks ({sum(breaks.values())}): " + "; ".join(parts) + more
