"""Whether compiling paid: the timings that judge it (a host-bound cell's from a user's loop),
the speedup, and the calls after which the compile has paid for itself."""

from __future__ import annotations

import math


def _num(value, fmt):
    return "-" if value is None else format(value, fmt)


def paced(r) -> tuple[dict, dict]:
    """(eager, compiled) timings that say whether compiling was worth it: a user's loop for a
    host-bound cell, whose do_bench figures hide host time (its L2 flush lets the host run
    ahead), over all of its loops; do_bench's otherwise."""
    if r.paced_by_loop:
        return r.loop_timing["eager"], r.loop_timing["compiled"]
    # the medians from the record's own fields (a hand-made record may carry no summaries)
    return (
        {**(r.eager_timing or {}), "median_ms": r.eager_ms},
        {**(r.compiled_timing or {}), "median_ms": r.compiled_ms},
    )


def saves_time(r) -> bool:
    """Compiled beats eager by more than the timing spread: its p90 under eager's p10."""
    if r.eager_ms is None:  # eager could not run (eager_note): nothing to beat
        return False
    eager, compiled = paced(r)
    if "p90_ms" in compiled and "p10_ms" in eager:
        return compiled["p90_ms"] < eager["p10_ms"]
    return bool(compiled["median_ms"] and eager["median_ms"]) and (
        compiled["median_ms"] < eager["median_ms"]
    )


def break_even_calls(compile_s: float | None, r):
    """Calls after which compiling has paid for itself; None when it never pays (compiled is
    not faster than eager by more than the spread of the two timings)."""
    if not compile_s or not saves_time(r):
        return None
    eager, compiled = paced(r)
    return math.ceil(compile_s / ((eager["median_ms"] - compiled["median_ms"]) / 1e3))


def paced_speedup(r) -> float | None:
    """eager over compiled, from the timings `paced` picks."""
    if r.speedup is None:
        return None
    eager, compiled = paced(r)
    return eager["median_ms"] / compiled["median_ms"]


def speedup_text(r) -> str:
    """eager over compiled; a host-bound cell's from a user's loop, marked `loop`."""
    if r.paced_by_loop and r.speedup is not None:
        return f"{paced_speedup(r):.2f} loop"
    return _num(r.speedup, ".2f")


def pays_text(r, cold: str, warm: str) -> str:
    """The summary's words for the break-even (cold and warm as the table gives them): "never"
    only where compiled is not faster at the median; faster there but within the timings'
    spread, the break-even is unknown (the two once read "speedup 8.01x" and "never pays off"
    on one noisy cell)."""
    if warm != "never":
        return f"pays off after {cold} calls (cold), {warm} (warm)"
    if (paced_speedup(r) or 0) > 1:
        return "break-even unknown: faster at the median, but the timings' spreads overlap"
    return "never pays off: compiled is not faster beyond the timing spread"
