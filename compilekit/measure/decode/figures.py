"""The arithmetic of a decode cell: bytes a token must read, the rate achieved, its share of the
device's measured copy ceiling, and the break-even of a compile, in tokens. Plain numbers in,
plain numbers out: the tests check them against hand-computed cases."""

from __future__ import annotations

import math
import re
import statistics

from compilekit.evidence import shares


def weight_bytes(model, batch: int) -> int:
    """Bytes of weights one token's forward reads: every parameter once (shared ones once),
    except the input embedding table, of which only the batch's rows are read (unless the
    output layer shares it, and then it is read whole)."""
    seen, total = set(), 0
    for param in model.parameters():
        if param.data_ptr() not in seen:
            seen.add(param.data_ptr())
            total += param.numel() * param.element_size()
    table = model.get_input_embeddings().weight
    output = model.get_output_embeddings()
    if output is None or output.weight.data_ptr() != table.data_ptr():
        total -= table.numel() * table.element_size()
        total += batch * table.shape[1] * table.element_size()
    return total


def kv_bytes_per_position(cache) -> int:
    """Bytes of keys and values one cached position holds, over all layers and the batch."""
    total = 0
    for layer in cache.layers:
        for tensor in (layer.keys, layer.values):  # [B, kv heads, capacity, head dim]
            total += tensor[:, :, 0].numel() * tensor.element_size()
    return total


def bytes_per_token(weights: int, kv_per_position: int, prompt: int, new: int) -> float:
    """Least bytes read per generated token, averaged over the steps after the first token:
    the weights, and the keys and values of every position the token attends to (the step at
    position p attends to p + 1 of them; p runs from prompt to prompt + new - 2)."""
    steps = max(new - 1, 1)
    attended = sum(p + 1 for p in range(prompt, prompt + steps)) / steps
    return weights + kv_per_position * attended


def rate(bytes_per_tok: float, ms_per_token: float, copy_gbps: float | None) -> dict:
    """Achieved GB/s at this time per token, its share of the copy ceiling, and the ceiling's
    own tokens/s and ms per token (the limit: the bytes once per token at that speed)."""
    gbps = bytes_per_tok / (ms_per_token * 1e-3) / 1e9
    out = {"gbps": gbps, "share_of_copy": None, "limit_ms": None, "limit_tokens_per_s": None}
    if copy_gbps:
        out["share_of_copy"] = gbps / copy_gbps
        out["limit_ms"] = bytes_per_tok / (copy_gbps * 1e9) * 1e3
        out["limit_tokens_per_s"] = 1e3 / out["limit_ms"]
    return out


def summary(ms: list[float]) -> dict:
    """median, p90, mean of per-token times, tokens/s per sequence from the mean, and how
    many times they come from."""
    if not ms:
        return {
            "median_ms": None,
            "p90_ms": None,
            "mean_ms": None,
            "tokens_per_s": None,
            "tokens_timed": 0,
        }
    ordered = sorted(ms)
    p90 = ordered[math.ceil(0.9 * len(ordered)) - 1]  # nearest rank
    mean = statistics.fmean(ms)
    return {
        "median_ms": statistics.median(ms),
        "p90_ms": p90,
        "mean_ms": mean,
        "tokens_per_s": 1e3 / mean,
        "tokens_timed": len(ms),
    }


def break_even_tokens(compile_s: float | None, eager_ms: float, compiled_ms: float):
    """Tokens after which the compile has paid for itself (None: compiled is not faster)."""
    if compile_s is None or compiled_ms >= eager_ms:
        return None
    return compile_s * 1e3 / (eager_ms - compiled_ms)


def median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


# what a kernel's name says it does in a decode step, first match wins: cuBLAS's and
# CUTLASS's kernels, Inductor's matmul templates (triton_tem_fused_mm_*), a CPU's aten ops
KERNEL_CLASSES = (
    ("sampling", r"argmax"),
    ("graph_copies", r"multi_tensor_apply|foreach_copy"),
    ("attention", r"sdpa|flash|fmha|attention|attn"),
    (
        "matmuls",
        r"nvjet|gemv|gemm|splitkreduce|cutlass|xmma|cublas|matmul|linear|"
        r"(^|[_:])(add|b)?mm($|[_:])",
    ),
)
# transformers' call of the model's attention, beside SDPA's, flex's and flash-attn's
# (shares.ATTENTION_CALL): a kernel launched inside it (a plugged-in attention's) is attention
ATTENTION_INTERFACE = "attention_interface("


def kernel_class(kernel) -> str:
    """The part of a decode step a kernel is: its name (a str), or its kernel-map record (a
    dict with name, aten_ops, source_lines), whose ops and lines settle what a name cannot: a
    variance kernel named for the matmul beside it, a plugged-in attention's own kernels."""
    record = kernel if isinstance(kernel, dict) else {"name": kernel}
    low = record["name"].lower()
    for which, pattern in KERNEL_CLASSES:
        if not re.search(pattern, low):
            continue
        if which == "matmuls" and shares.misnamed_matmul(record):
            break  # a norm's variance named for the matmul beside it
        return which
    lines = record.get("source_lines") or ()
    codes = [line.get("code") or "" for line in lines]
    if any(ATTENTION_INTERFACE in code or shares.ATTENTION_CALL.search(code) for code in codes):
        return "attention"
    return "other_kernels"


def gap(
    token_ms: float,
    kernels: list,
    weights: float,
    kv: float,
    copy_gbps: float,
    overlap_ms: float = 0.0,
) -> dict:
    """Where a token's time goes beyond the limit (weights and attended cache read once at
    the copy speed), in ms per token; the parts add up to token_ms - limit_ms. kernels:
    (name or kernel-map record, device ms per step) of one profiled step (kernel_class). The
    matmuls are charged beyond the time the weights take at the copy speed, attention beyond
    its cache bytes' time; sampling, CUDA-graph input copies and the other kernels in full;
    idle_gpu is the token's time with no kernel running (the host's loop, syncs). overlap_ms:
    the step's time during which two kernels ran at once (programmatic dependent launch: a
    kernel starts, and waits, while the one before it finishes), counted in both kernels'
    times and taken back once as overlapped_ms, a negative part."""
    per = {which: 0.0 for which, _ in KERNEL_CLASSES} | {"other_kernels": 0.0}
    for kernel, ms in kernels:
        per[kernel_class(kernel)] += ms
    at_copy = 1e3 / (copy_gbps * 1e9)  # ms per byte
    device_ms = sum(per.values())
    return {
        "token_ms": token_ms,
        "limit_ms": (weights + kv) * at_copy,
        "idle_gpu_ms": token_ms - (device_ms - overlap_ms),
        "overlapped_ms": -overlap_ms,
        "matmuls_beyond_copy_ms": per["matmuls"] - weights * at_copy,
        "matmuls_share_of_copy": weights * at_copy / per["matmuls"] if per["matmuls"] else None,
        "attention_beyond_copy_ms": per["attention"] - kv * at_copy,
        "sampling_ms": per["sampling"],
        "graph_copies_ms": per["graph_copies"],
        "other_kernels_ms": per["other_kernels"],
    }
