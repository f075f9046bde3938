"""Compare host-bound loops taken at the same CPU speed: `compilekit verify`'s toolkit process
against bare ones (match), a cell's eager loops against its compiled ones (paired_timings,
for the reports' speedup and break-even), and its launch-only host loops against its user's
loop (at_same_speed).

A host-bound call costs what the CPU's speed of the moment makes it. The H200's VM hosts
switch between two speeds (about 45 and 80 ns per step of a Python loop) within a fraction of
a second, in any process (experiments/results/h200/host_drift): one process can spend most of
its loops at the slow speed and the next at the fast one, 1.6x apart on the same code. Each
timed loop, in the toolkit (timing.loop_timing) and in the bare child (verify.bare_loop),
carries the speed a short probe read just before it. Here both sides keep only the loops
taken at the fastest speed either side saw (within FAST_BAND of it), and compare those: like
with like, no model of how cost follows speed. A cost the toolkit's process adds to every
call still shows, at that speed as at any other.
"""

from __future__ import annotations

import statistics
from typing import NamedTuple

# A loop counts as run at the fast speed when its probe read within this of the fastest probe
# either process saw (the two speeds are 1.6-1.8x apart; the probe repeats within a few %).
FAST_BAND = 1.15
# Fewer fast loops than this in a process and its figure is not taken.
MIN_FAST_LOOPS = 5


class Matched(NamedTuple):
    """The toolkit's and each bare process's median ms per call over its fast loops (None where
    it had fewer than MIN_FAST_LOOPS), the probe's limit, and each side's (fast, all) counts."""

    toolkit_ms: float | None
    bare_ms: list  # per bare process, float or None
    limit_ns: float
    toolkit_counts: tuple
    bare_counts: list  # per bare process, (fast, all)


def fast_limit(*loop_lists: list) -> float:
    """The probe reading a loop must not exceed to count as run at the fast speed: FAST_BAND
    over the fastest reading in any of these lists of [ms per call, probe ns] loops."""
    return min(ns for loops in loop_lists for _, ns in loops) * FAST_BAND


def fast_ms(loops: list, limit: float) -> list[float]:
    """The ms per call of the loops whose probe read at most `limit`, in the order taken."""
    return [ms for ms, ns in loops if ns <= limit]


def match(toolkit_loops: list, bare_runs: list[list]) -> Matched:
    """toolkit_loops and each of bare_runs: [[ms per call, probe ns], ...] in the order taken."""
    limit = fast_limit(toolkit_loops, *bare_runs)

    def fast_median(loops) -> tuple[float | None, tuple]:
        fast = fast_ms(loops, limit)
        counts = (len(fast), len(loops))
        return (statistics.median(fast) if len(fast) >= MIN_FAST_LOOPS else None), counts

    toolkit_ms, toolkit_counts = fast_median(toolkit_loops)
    bares = [fast_median(loops) for loops in bare_runs]
    return Matched(toolkit_ms, [b[0] for b in bares], limit, toolkit_counts, [b[1] for b in bares])


def match_shared(toolkit_loops: list, bare_loops: list) -> tuple[float, float, float] | None:
    """(toolkit ms, bare ms, the band's lowest probe ns): the two processes' medians over their
    loops in the fastest band of CPU speeds (FAST_BAND wide) where each ran MIN_FAST_LOOPS loops,
    fast or slow: a pair whose toolkit process never had the fast speed can still be read at
    the slow one both had (the H200, 2026-12-01: two of three pairs otherwise gave nothing).
    None where they share no such band."""
    for low in sorted({ns for _, ns in toolkit_loops} | {ns for _, ns in bare_loops}):
        sides = [
            [ms for ms, ns in loops if low <= ns <= low * FAST_BAND]
            for loops in (toolkit_loops, bare_loops)
        ]
        if min(len(side) for side in sides) >= MIN_FAST_LOOPS:
            return statistics.median(sides[0]), statistics.median(sides[1]), low
    return None


def paired_timings(eager: dict, compiled: dict) -> tuple[dict, dict] | None:
    """A host-bound cell's eager and compiled loop timings (timing.loop_timing), each
    summarized over its loops at the fastest CPU speed either saw, so the speedup compares
    like with like: taken as they come, eager's loops at 45 ns per step against compiled's at
    80 would read a 1.7x speedup that is the CPU's. None where either has fewer than
    MIN_FAST_LOOPS there, or carries no speeds (a cell measured before they were recorded)."""
    from compilekit.timing import summary

    if not eager.get("loops") or not compiled.get("loops"):
        return None
    limit = fast_limit(eager["loops"], compiled["loops"])
    fast = [fast_ms(timing["loops"], limit) for timing in (eager, compiled)]
    if min(len(kept) for kept in fast) < MIN_FAST_LOOPS:
        return None
    return tuple(
        {**summary(kept), "calls": timing.get("calls"), "at_most_ns": round(limit, 1)}
        for kept, timing in zip(fast, (eager, compiled))
    )


def at_same_speed(reference: list, loops: list, min_matches: int = 3) -> list[tuple]:
    """(ms, reference ms) for each of `loops` whose CPU speed `reference` also ran at: the
    median of the reference loops whose probe read within FAST_BAND of that loop's, either way;
    a loop with fewer than `min_matches` such reference loops is left out. Both are lists of
    [ms per call, probe ns]: a cell's launch-only host loops (timing.host_loops) against its
    user's loop (timing.loop_timing), taken a moment apart and maybe at different speeds."""
    pairs = []
    for ms, ns in loops:
        near = [r_ms for r_ms, r_ns in reference if ns / FAST_BAND <= r_ns <= ns * FAST_BAND]
        if len(near) >= min_matches:
            pairs.append((ms, statistics.median(near)))
    return pairs


def counts_text(matched: Matched) -> str:
    """'toolkit 31 of 76 loops, bare 20, 0, 44 of 76': how many loops each side ran fast."""
    toolkit = f"toolkit {matched.toolkit_counts[0]} of {matched.toolkit_counts[1]} loops"
    fast = ", ".join(str(c[0]) for c in matched.bare_counts)
    totals = {c[1] for c in matched.bare_counts}
    of = f" of {totals.pop()}" if len(totals) == 1 else ""
    return f"{toolkit}, bare {fast}{of}"
