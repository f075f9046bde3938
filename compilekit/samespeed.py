"""Compare host-bound loops taken at the same CPU speed, for `compilekit verify`.

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


def match(toolkit_loops: list, bare_runs: list[list]) -> Matched:
    """toolkit_loops and each of bare_runs: [[ms per call, probe ns], ...] in the order taken."""
    fastest = min(ns for loops in [toolkit_loops, *bare_runs] for _, ns in loops)
    limit = fastest * FAST_BAND

    def fast_median(loops) -> tuple[float | None, tuple]:
        fast = [ms for ms, ns in loops if ns <= limit]
        counts = (len(fast), len(loops))
        return (statistics.median(fast) if len(fast) >= MIN_FAST_LOOPS else None), counts

    toolkit_ms, toolkit_counts = fast_median(toolkit_loops)
    bares = [fast_median(loops) for loops in bare_runs]
    return Matched(toolkit_ms, [b[0] for b in bares], limit, toolkit_counts, [b[1] for b in bares])


def counts_text(matched: Matched) -> str:
    """'toolkit 31 of 76 loops, bare 20, 0, 44 of 76': how many loops each side ran fast."""
    toolkit = f"toolkit {matched.toolkit_counts[0]} of {matched.toolkit_counts[1]} loops"
    fast = ", ".join(str(c[0]) for c in matched.bare_counts)
    totals = {c[1] for c in matched.bare_counts}
    of = f" of {totals.pop()}" if len(totals) == 1 else ""
    return f"{toolkit}, bare {fast}{of}"
