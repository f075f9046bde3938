"""Each kernel against this machine's measured ceilings (a roofline).

A kernel's traffic is the bytes of the tensors its launching op reads and writes (recorded by
the profiler: profiling.launcher_bytes; for a launch that records none, a CUDA-graph replay's
or a C++ kernel's, its call's tensors in Inductor's output code: evidence/codecost.py), its work
the FLOPs torch counts for matmuls (the output code's for a replayed matmul, the post-grad
graph's for a GEMM template; an SDPA op's from its shapes: profiling.op_flops), or, for an
attention kernel none of those count (a raw launch, a template), the FLOPs the variant
declares. Against the matmul and copy ceilings `compilekit env` measures
(envinfo.measure_ceilings), each kernel gets its achieved GB/s and TFLOP/s and one class:
- `launch`: shorter than LAUNCH_BOUND_MS per call: fixed costs (launch, ramp-up, tail) dominate,
  neither roof applies;
- `compute`: its FLOPs per byte lie above the ridge point (ceiling FLOP/s over ceiling B/s);
- `memory`: below it; also Inductor's pointwise and reduction kernels and copies, which do a few
  FLOPs per byte, far under any GPU's or CPU's ridge;
- none: nothing to go on (a call whose sizes neither the profiler nor the output code gives;
  a template or library kernel without a FLOP count).
The run's line (summary) gives each class's share of the device time and how near its roof the
class runs: a memory class at 10% of copy bandwidth is not held back by bandwidth.
"""

from __future__ import annotations

LAUNCH_BOUND_MS = 0.005
# Kernels that move data and do (almost) no arithmetic, where the FLOP count torch leaves out
# does not matter: Inductor's fused pointwise/reduction kernels (not its templates), copies, and
# the eager ops of that kind.
MEMORY_KINDS = ("generated", "memcpy")
MEMORY_OPS = {
    "softmax",
    "safe_softmax",
    "log_softmax",
    "masked_fill",
    "where",
    "mul",
    "div",
    "add",
    "sub",
    "exp",
    "copy",
    "fill",
    "zero",
    "clone",
    "contiguous",
    "to_copy",
    "tril",
    "triu",
    # a model's pointwise, normalization and gather ops
    "gelu",
    "silu",
    "relu",
    "tanh",
    "neg",
    "pow",
    "rsqrt",
    "mean",
    "sum",
    "layer_norm",
    "native_layer_norm",
    "rms_norm",
    "embedding",
    "cat",
    "to",
    "reshape",
}


def _is_memory_op(launcher: str) -> bool:
    """`aten::_softmax`, `aten::masked_fill_`: a MEMORY_OPS op, in place or private. By its whole
    name: `aten::matmul` ends in "mul" and is no pointwise multiply."""
    return launcher.rsplit("::", 1)[-1].strip("_") in MEMORY_OPS


# A ceiling is measured once per device model and torch, then kept: a kernel that beats it
# ran from a cache, mostly read, or met a ceiling measured low; it did not break physics.
OVER_CEILING = (
    "a share over 100%: the kernel ran faster than this machine's ceiling as `compilekit env` "
    "measured it once and kept it: its data held in a cache from call to call (a small working "
    "set), a kernel that mostly reads (the copy ceiling reads and writes), or a ceiling "
    "measured in a slow minute (`python -m compilekit env --remeasure` measures it again)"
)


OVER_BY = 1.05  # a share of a ceiling above this beats it by more than timing noise


def over_ceiling(roof: dict, shares=("bandwidth_share", "compute_share")) -> bool:
    """Whether a kernel's placement (place) beats a ceiling, one of `shares`, by more than
    timing noise."""
    return any((roof.get(k) or 0) > OVER_BY for k in shares)


def place(record: dict, ceilings: dict) -> dict:
    """{"gbps", "bandwidth_share", "tflops", "compute_share", "bound"} for one kernel record
    (kernels.json); a figure is left out where its input was not recorded."""
    ms = record.get("device_ms")
    if not ms or not ceilings:
        return {"bound": None}
    seconds = ms * 1e-3
    out: dict = {}
    nbytes, flops = record.get("bytes"), record.get("flops")
    if nbytes:
        out["gbps"] = nbytes / seconds / 1e9
        out["bandwidth_share"] = out["gbps"] / ceilings["copy_gbps"]
    if flops:
        out["tflops"] = flops / seconds / 1e12
        out["compute_share"] = out["tflops"] / ceilings["matmul_tflops"]
    if ms < LAUNCH_BOUND_MS:
        out["bound"] = "launch"
    elif nbytes and flops:
        ridge = ceilings["matmul_tflops"] * 1e12 / (ceilings["copy_gbps"] * 1e9)
        out["bound"] = "compute" if flops / nbytes > ridge else "memory"
    elif nbytes and (
        record.get("kind") in MEMORY_KINDS
        or (record.get("kind") == "aten" and _is_memory_op(record["launcher"]))
    ):
        out["bound"] = "memory"
    else:
        out["bound"] = None
    return out


def attribute_variant_flops(records: list[dict], flops_per_forward: float | None) -> str | None:
    """Give the variant's declared FLOPs to the kernel that does the attention, in place, when
    torch counted none: one library, template or extern kernel (cuDNN, flash, FlexAttention's
    template, a user's Triton kernel) holding at least half of the forward's device time. The
    profiler counts FLOPs only for matmuls, so such a kernel could not be placed otherwise.
    Returns that kernel's name (None when no kernel qualifies)."""
    if not flops_per_forward or any(r.get("flops") for r in records):
        return None
    total = sum(r["device_ms"] * r["calls_per_forward"] for r in records)
    doers = [r for r in records if r.get("kind") not in MEMORY_KINDS and r["calls_per_forward"]]
    if not total or not doers:
        return None
    top = max(doers, key=lambda r: r["device_ms"] * r["calls_per_forward"])
    if top["device_ms"] * top["calls_per_forward"] < total / 2:
        return None
    top["flops"] = flops_per_forward / top["calls_per_forward"]
    top["flops_from"] = "the variant's declared FLOPs"
    return top["name"]


IO_BYTES_FROM = "the call's inputs and output, each moved once (a lower bound)"


def annotate(
    records: list[dict],
    ceilings: dict,
    flops_per_forward: float | None = None,
    io_bytes: float | None = None,
) -> None:
    """Add each kernel's roofline figures to its record, in place (with the variant's FLOPs on
    its attention kernel where torch counted none: attribute_variant_flops). That kernel, where
    no op's tensor sizes gave its bytes (a raw launch, as gluon-flash's eager one, or a replay
    inside a CUDA graph), is given `io_bytes`: the call's q, k, v and output, each read or
    written once, the least it can move; without bytes it could not be placed at all."""
    attribute_variant_flops(records, flops_per_forward)
    for record in records:
        if io_bytes and record.get("flops_from") and not record.get("bytes"):
            record["bytes"] = io_bytes / record["calls_per_forward"]
            record["bytes_from"] = IO_BYTES_FROM
    for record in records:
        record["roofline"] = place(record, ceilings)


UNPLACED = "not placed (no bytes or FLOPs recorded)"
NONE_PLACED = "roofline: no kernel placed (no bytes or FLOPs recorded for any)"
# the share of its roof a class reaches, as the kernel table names the ceilings
CLASS_SHARE = {
    "memory": ("bandwidth_share", "copy GB/s"),
    "compute": ("compute_share", "matmul TFLOP/s"),
}


def summary(records: list[dict]) -> str | None:
    """One line: the share of the forward's device time in each class, largest first, and how
    near its roof each class runs (its kernels' shares weighted by their time: the class's
    bytes or FLOPs over its time, against the ceiling); kernels without recorded bytes or FLOPs
    (library and template kernels, calls whose sizes the output code does not give) count as
    "not placed" rather than in a class they may not belong to."""
    totals: dict[str, float] = {}
    reached: dict[str, float] = {}
    for r in records:
        roof = r.get("roofline") or {}
        bound = roof.get("bound") or UNPLACED
        ms = r["device_ms"] * r["calls_per_forward"]
        totals[bound] = totals.get(bound, 0.0) + ms
        if bound in CLASS_SHARE:
            reached[bound] = reached.get(bound, 0.0) + ms * roof.get(CLASS_SHARE[bound][0], 0.0)
    whole = sum(totals.values())
    if not whole:
        return None
    if totals.get(UNPLACED, 0.0) == whole:
        return NONE_PLACED
    parts = []
    for bound, share in sorted(totals.items(), key=lambda kv: -kv[1]):
        part = f"{share / whole:.0%} {bound}"
        if bound in reached and share:
            near = reached[bound] / share
            over = ", over the kept ceiling" if near > OVER_BY else ""
            part += f" (at {near:.0%} of {CLASS_SHARE[bound][1]}{over})"
        parts.append(part)
    return "roofline: " + ", ".join(parts)
