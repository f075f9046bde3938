"""The measure process's timed calls: steady state of compiled and eager (do_bench on CUDA),
the host's cost per call and a user's loop on CUDA, and the one noise note that says when a
timing was disturbed (taken again, the quietest kept)."""

from __future__ import annotations

import contextlib
import os
import time

# Past this ratio of the timed samples' p90 to the fastest, another process most likely competed.
NOISY_SPREAD = 1.5
# Other processes keeping this many cores busy (or the hypervisor stealing them) while a cell is
# timed disturb it: the timed phase is meant to have the CPU to itself (measure/cpuwatch.py).
# At least one core, and a quarter of the machine's: a daemon busy on one core of 16 leaves the
# timed thread its own core, and would otherwise mark every cell of a sweep as disturbed.
BUSY_OTHERS_CORES = 1.0
BUSY_OTHERS_SHARE = 0.25
# A disturbed timing is taken again this many times at most, each after a pause
# (COMPILEKIT_RETIMES sets another count: 0 for a quick look that keeps the first timing).
RETIMES = 2
RETIME_PAUSE_S = 1.0


def time_cell(cell, variant, compiled, args, result, alone=contextlib.nullcontext) -> None:
    """Steady state of eager and compiled (do_bench on CUDA), the host cost of one call, and on
    CUDA a user's loop of each (back-to-back calls: what host-bound judgements read). A
    disturbed attempt (see noise_note) is timed again after a pause, up to RETIMES times, and
    the quietest attempt (undisturbed, then the fastest) is kept: a short disturbance
    from another process on a shared host says nothing about the code. Every attempt's medians
    are kept in timing_attempts, with what else used the CPU meanwhile (cpuwatch). `alone()`
    holds what the timed calls must have to themselves (in a sweep, the GPU and a core:
    measure/locks.py) for each attempt, and is let go during the pause between attempts."""
    from compilekit.measure import cpuwatch

    attempts = []
    with_eager = result.eager_note is None  # else eager ran out of memory: compiled alone
    for attempt in range(1 + retimes()):
        if attempt:
            time.sleep(RETIME_PAUSE_S)
        with alone():
            # in a sweep the timing thread has a core of its own (alone() moved it there):
            # only what ran on it competed with it
            pinned = cpuwatch.timing_cores()
            with cpuwatch.watch(pinned) as watched:
                eager, steady, host, loops = timed_calls(cell, variant, compiled, args, with_eager)
        load = os.getloadavg()[0] if hasattr(os, "getloadavg") and not pinned else None
        timed = [t for t in (eager, steady) if t]
        cores = len(pinned) if pinned else os.cpu_count() or 1
        note = noise_note(timed, load, cores, watched.use, pinned=bool(pinned))
        attempts.append((spread(timed), eager, steady, host, loops, note, watched.use))
        if note is None:
            break
    # the quietest: an attempt with no noise note first, then the fastest. Not the smallest
    # spread: on an oversubscribed CPU every sample of an attempt can wait out the same
    # scheduler slices (OpenMP threads at a barrier), tight and hundreds of times too slow;
    # a disturbance only ever adds time
    quietest = min(attempts, key=lambda a: (a[5] is not None, a[2]["median_ms"]))
    _, eager, steady, host, loops, note, use = quietest
    result.cpu_use = use.to_dict() if use else None
    if len(attempts) > 1:
        result.timing_attempts = [
            {"eager_ms": e and e["median_ms"], "compiled_ms": c["median_ms"], "spread": sp}
            | {"noise": n}
            | ({"cpu_use": u.to_dict()} if u else {})
            for sp, e, c, _, _, n, u in attempts
        ]
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


def retimes() -> int:
    """How many times a disturbed timing is taken again: COMPILEKIT_RETIMES, else RETIMES."""
    value = os.environ.get("COMPILEKIT_RETIMES", "")
    return int(value) if value.isdigit() else RETIMES


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


def noise_note(
    timings: list[dict], load: float | None, cores: int, use=None, pinned: bool = False
) -> str | None:
    """Why these timings may be disturbed (a wide spread, a loaded machine, other processes or
    the hypervisor busy on our cores meanwhile: `use`, a cpuwatch.CpuUse); None if clean. A
    wide spread also says what else ran, when /proc could tell. `pinned`: the timing thread
    ran on these `cores` only (the machine's load average, None, says nothing about them), and
    a quarter of one of them taken by another process competes with it."""
    notes = []
    widest = spread(timings)
    if widest > NOISY_SPREAD:
        notes.append(f"p90 is {widest:.2f}x the fastest sample")
    if load is not None and load > cores:
        notes.append(f"load average {load:.1f} on {cores} cores")
    share = BUSY_OTHERS_SHARE * cores
    busy_cores = share if pinned else max(BUSY_OTHERS_CORES, share)
    busy = use is not None and max(use.others_cores, use.steal_cores) >= busy_cores
    if use is not None and (notes or busy):
        notes.append(f"meanwhile {use.text()}")
    return "; ".join(notes) or None
