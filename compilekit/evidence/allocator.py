"""What the CUDA caching allocator does in one forward: peak allocated and reserved memory,
fragmentation at the peak, and what CUDA-graph pools hold (docs/memory.md).

Read after the timed calls, one forward per side (eager, compiled), each from an emptied
cache: the peaks are what that forward makes the allocator take, not what earlier calls left
reserved (that is `held_reserved_mb`, read first).
"""

from __future__ import annotations

import os

from compilekit.model.errors import first_line

MB = 2**20
# the pool every allocation outside a CUDA graph's private pool comes from
DEFAULT_POOL = (0, 0)
CPU_NOTE = (
    "memory on the CPU: each op's allocated bytes only (the ops table); peak, reserved memory "
    "and fragmentation are the CUDA caching allocator's, measured on CUDA cells"
)


def fragmentation(allocated: float, reserved: float) -> float:
    """The share of reserved memory no tensor uses: 1 - allocated / reserved (0 for none)."""
    return 1 - allocated / reserved if reserved > 0 else 0.0


def forward_figures(stats: dict, retries_before: int = 0, pools: dict | None = None) -> dict:
    """One forward's figures from torch.cuda.memory_stats() read after it, its peaks reset
    before it. pools (pool_figures): what CUDA-graph pools hold. A graph's replay allocates
    nothing, its intermediates live in reserve of their own, so fragmentation is the default
    pool's: the pools' bytes come out of both sides."""
    allocated = stats.get("allocated_bytes.all.peak", 0)
    reserved = stats.get("reserved_bytes.all.peak", 0)
    in_pools = pools or {"allocated_mb": 0.0, "reserved_mb": 0.0}
    return {
        "peak_allocated_mb": allocated / MB,
        "peak_reserved_mb": reserved / MB,
        "fragmentation": fragmentation(
            allocated / MB - in_pools["allocated_mb"], reserved / MB - in_pools["reserved_mb"]
        ),
        "inactive_split_mb": stats.get("inactive_split_bytes.all.peak", 0) / MB,
        "segments": stats.get("segment.all.peak", 0),
        # cudaMalloc failed and the cache was flushed to retry: fragmentation that cost time
        "alloc_retries": stats.get("num_alloc_retries", 0) - retries_before,
    }


def pool_figures(segments: list[dict]) -> dict | None:
    """What private pools (CUDA graphs') hold, from torch.cuda.memory_snapshot()'s segments;
    None where there are none."""
    own = [s for s in segments if tuple(s.get("segment_pool_id", DEFAULT_POOL)) != DEFAULT_POOL]
    if not own:
        return None
    return {
        "reserved_mb": sum(s["total_size"] for s in own) / MB,
        "allocated_mb": sum(s["allocated_size"] for s in own) / MB,
        "segments": len(own),
        "pools": len({tuple(s["segment_pool_id"]) for s in own}),
    }


def one_forward(fn, args, own_pools: bool) -> dict:
    """fn(*args) once from an emptied cache, on CUDA: its forward_figures, with what
    CUDA-graph pools hold where they are fn's (own_pools: the compiled side; an eager call's
    figures leave the compiled side's pools out, as it does not use them)."""
    import torch

    torch.cuda.synchronize()
    torch.cuda.empty_cache()  # a CUDA graph's pool stays: empty_cache frees unused blocks only
    torch.cuda.reset_peak_memory_stats()
    retries = torch.cuda.memory_stats().get("num_alloc_retries", 0)
    out = fn(*args)
    torch.cuda.synchronize()
    stats = torch.cuda.memory_stats()
    pools = pool_figures(torch.cuda.memory_snapshot())
    del out
    figures = forward_figures(stats, retries, pools)
    if pools and own_pools:
        figures["cudagraph_pools"] = pools
    return figures


def held_mb(device: str = "cuda") -> float | None:
    """MiB the process holds reserved now (read right after the timed calls: steady state);
    None on the CPU."""
    if device != "cuda":
        return None
    import torch

    return torch.cuda.memory_reserved() / MB


def measure(eager, compiled, args, mode: str, held: float | None = None) -> dict:
    """{"what", "held_reserved_mb", "allocator_conf", "eager": figures, "compiled": figures}
    (a side's figures {"error": line} where its forward failed here): eager None where eager
    did not run; an eager cell has only "eager". held: held_mb() as the timed calls left it
    (read now where not given)."""
    import torch

    memory = {
        "what": "one forward per side, each from an emptied cache",
        "held_reserved_mb": held_mb() if held is None else held,
        "allocator_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
    }
    sides = {"eager": eager, "compiled": compiled if mode != "eager" else None}
    for side, fn in sides.items():
        if fn is None:
            continue
        try:
            memory[side] = one_forward(fn, args, side == "compiled")
        except Exception as exc:  # evidence beside the figures (an OOM here): never fails
            torch.cuda.empty_cache()
            memory[side] = {"error": first_line(exc)}
    return memory


def record(cell, compiled, eager, args, result, held: float | None = None) -> None:
    """A cell's result.memory and peak_memory_mb (the CPU's note on a CPU): eager's side
    where `eager` is given and ran in the timed calls; held as measure's."""
    if cell.device != "cuda":
        result.memory = {"note": CPU_NOTE}
        return
    if cell.mode == "eager":
        eager = compiled
    elif result.eager_ms is None:  # eager did not run (out of memory): nor here
        eager = None
    result.memory = measure(eager, compiled, args, cell.mode, held)
    result.peak_memory_mb = peak_mb(result.memory)


def measured_side(memory: dict | None) -> dict:
    """The figures of the side the cell measured: compiled's, or eager's in an eager cell
    ({} where neither is there)."""
    return (memory or {}).get("compiled") or (memory or {}).get("eager") or {}


def peak_mb(memory: dict | None) -> float | None:
    """The measured side's peak allocated MiB."""
    return measured_side(memory).get("peak_allocated_mb")
