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


# A compiled cell's eager baseline is timed in its own process, beside its compiled calls. In a
# sweep other cells compile on the same host meanwhile, and a host-bound eager call follows the
# host: farther than this from the sweep's eager cell of the same workload, the report gives both
BASELINE_APART = 1.2


def workload_key(r) -> tuple:
    """What makes two cells' eager calls the same: the workload and how it was called, not the
    compile mode or its Inductor options."""
    return (r.variant, str(r.shape), r.dtype, r.device, r.alloc, r.grad, r.weights)


def eager_cell(r, results: list):
    """The sweep's measured eager cell of r's workload, or None."""
    key = workload_key(r)
    return next(
        (e for e in results if e.mode == "eager" and e.measured and workload_key(e) == key),
        None,
    )


def apart(beside: float, own: float) -> bool:
    """Whether two eager figures of one workload are more than BASELINE_APART apart."""
    return not 1 / BASELINE_APART <= beside / own <= BASELINE_APART


def baseline_note(r, results: list) -> str | None:
    """Where a compiled forward's own eager baseline and the sweep's eager cell of its workload
    are more than BASELINE_APART apart, on the timings its speedup reads (`paced`: a user's loop
    for a host-bound cell): both figures, and the speedup against each."""
    if r.mode == "eager" or r.decode or not r.measured or r.eager_ms is None:
        return None
    own = eager_cell(r, results)
    if own is None:
        return None
    beside, compiled = (t["median_ms"] for t in paced(r))
    if r.paced_by_loop:
        other = ((own.loop_timing or {}).get("eager") or {}).get("median_ms")
    else:
        other = own.eager_ms
    if not other or not apart(beside, other):
        return None
    how = "in a loop " if r.paced_by_loop else ""
    return (
        f"its own eager baseline read {beside:.3f} ms {how}per call, the eager cell of this "
        f"workload {other:.3f} ({beside / other:.2f}x: one of the two was disturbed; in a sweep "
        f"other cells compile on the host beside a cell's timed calls): its speedup is "
        f"{beside / compiled:.2f}x against the first, {other / compiled:.2f}x against the second"
    )
