"""The measure process's timed calls: steady state of compiled and eager (do_bench on CUDA),
the host's cost per call and a user's loop on CUDA, and the one noise note that says when a
timing may have been disturbed (flagged, never hidden: the cell says to run it again)."""

from __future__ import annotations

import contextlib
import os

# Past this ratio of the timed samples' p90 to the fastest, another process most likely competed.
NOISY_SPREAD = 1.5


def time_cell(cell, variant, compiled, args, result, alone=None) -> None:
    """Steady state of eager and compiled (do_bench on CUDA), the host cost of one call, and on
    CUDA a user's loop of each (back-to-back calls: what host-bound judgements read), with the
    noise note (noise_note) where the samples' spread or the machine's load says the timing was
    disturbed. `alone`, a context, holds what the timed calls must have to themselves (in a
    sweep, the GPU and a core: measure/locks.py)."""
    with_eager = result.eager_note is None  # else eager ran out of memory: compiled alone
    with alone or contextlib.nullcontext():
        eager, steady, host, loops = timed_calls(cell, variant, compiled, args, with_eager)
        # in a sweep the timing thread had a core of its own: the machine's load says
        # nothing of that core, and the spread alone tells
        pinned = _pinned()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") and not pinned else None
    note = noise_note([t for t in (eager, steady) if t], load, os.cpu_count() or 1)
    result.compiled_ms, result.compiled_timing = steady["median_ms"], steady
    if eager:  # None where eager could not run: no eager figure, no speedup
        result.eager_ms, result.eager_timing = eager["median_ms"], eager
        result.speedup = eager["median_ms"] / steady["median_ms"]
    result.host_ms_per_call = host
    if loops:
        result.loop_timing = loops
        result.eager_loop_ms = loops["eager"]["median_ms"] if eager else None
        result.compiled_loop_ms = loops["compiled"]["median_ms"]
    if variant.flops is not None:
        result.flops = float(variant.flops(cell.shape))
        result.tflops = result.flops / (steady["median_ms"] * 1e-3) / 1e12
        if eager:
            result.eager_tflops = result.flops / (eager["median_ms"] * 1e-3) / 1e12
    result.noise_note = note
    result.noisy = note is not None


def _pinned() -> bool:
    """Whether this thread may run on some CPUs only (a sweep's quiet core, a user's taskset)."""
    if not hasattr(os, "sched_getaffinity"):
        return False
    return len(os.sched_getaffinity(0)) < (os.cpu_count() or 0)


def timed_calls(cell, variant, compiled, args, with_eager: bool):
    """(eager timing or None, compiled timing, host ms per call or None, {"compiled", "eager"}
    loops or None). The callable the cell is about first, in the order `compilekit verify`'s
    bare child times it (do_bench, a user's loop, the host's cost): the two processes then
    differ in what ran before, not in the order of the timed calls. Eager after it, where
    eager is only the comparison."""
    from compilekit.measure import timing

    cuda = cell.device == "cuda"
    steady = timing.bench(compiled, args, cell.device)  # in eager mode, the variant itself
    host, loops = None, None
    if cuda:
        loops = {"compiled": timing.loop_timing(compiled, args, steady["median_ms"])}
        loops["host"] = timing.host_loops(compiled, args, timing.host_calls(steady["median_ms"]))
        host = loops["host"]["median_ms"]
    if cell.mode == "eager":
        return steady, steady, host, loops and {**loops, "eager": loops["compiled"]}
    eager = timing.bench(variant.attention, args, cell.device) if with_eager else None
    if cuda and eager:
        loops["eager"] = timing.loop_timing(variant.attention, args, eager["median_ms"])
    return eager, steady, host, loops


def spread(timings: list[dict]) -> float:
    """The widest p90 / fastest-sample ratio among these timings (1.0: no spread)."""
    return max(t["p90_ms"] / t["min_ms"] if t["min_ms"] else 1.0 for t in timings)


def noise_note(timings: list[dict], load: float | None, cores: int) -> str | None:
    """Why these timings may be disturbed (a wide spread, a loaded machine); None if clean."""
    notes = []
    widest = spread(timings)
    if widest > NOISY_SPREAD:
        notes.append(f"p90 is {widest:.2f}x the fastest sample")
    if load is not None and load > cores:
        notes.append(f"load average {load:.1f} on {cores} cores")
    return "; ".join(notes) or None
