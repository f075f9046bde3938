"""Step 9: why the fast path was or was not taken.

Graph breaks, recompiles, CUDA graphs skipped (with torch's own reason), the SDPA backend that
actually ran, and which Inductor pattern rewrites fired.
"""

from __future__ import annotations

import contextlib
import logging

SDPA_BACKENDS = (
    ("cudnn", "cudnn"),
    ("flash", "flash"),
    ("fmha", "efficient"),
    ("efficient", "efficient"),
    ("_scaled_dot_product_attention_math", "math"),
    ("math", "math"),
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
        logger.disabled, logger.level = saved[0], saved[1]


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
        "inductor": {k: v for k, v in counters["inductor"].items() if v},
    }


def recompile_reasons() -> list[str]:
    """Why Dynamo compiled a frame again, one entry per recompile, in torch's words."""
    import re

    from torch._dynamo.utils import get_compilation_metrics

    reasons = []
    for metrics in get_compilation_metrics():
        recompile = getattr(metrics, "recompile_reason", None)
        if recompile:  # "0/0: n == 2     # file:3 in f\nUser stack trace: ...": its first line
            reasons.append(re.sub(r"\s+", " ", str(recompile).strip().splitlines()[0]))
    return reasons


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
    ops = {op for r in kernel_records for op in r["aten_ops"]}
    has_matmul = any(op.endswith(("bmm", "mm", "matmul")) for op in ops)
    has_softmax = any(op.endswith(("amax", "_softmax", "softmax", "exp")) for op in ops)
    if has_matmul and has_softmax:
        hint = "; `--pass naive-to-sdpa` rewrites its written-out forms into one SDPA"
        return (
            "Inductor's fuse_attention rewrite did not fire: the pattern stays matmul + "
            f"softmax + matmul (see kernels.json{'' if passes else hint})"
        )
    return None
