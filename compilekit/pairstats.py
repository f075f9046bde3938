"""How many pairs it takes to say "within" or "outside": `compilekit verify --paired`'s verdict
from its pairs' ratios (the toolkit's re-measure over a bare process's figure, one pair at a
time).

A pair's ratio carries both processes' own luck. On the H200's VM hosts, fresh bare processes
of one host-bound cell read 11-15% apart at the same CPU speed, pinned to one core or not
(experiments/results/h200/fidelity/2026-12-01e); so two pairs at 0.94 say nothing to 5%, and
one pair at 1.08 does not make a toolkit 8% slow. The verdict here is an interval: the 90%
t-interval of the pairs' mean log ratio (two one-sided 5% tests, as an equivalence check is
made). "within" when it lies inside the tolerance, "outside" when it lies wholly beyond it,
"inconclusive" otherwise, with the number of pairs the spread seen would need.
"""

from __future__ import annotations

import math
import statistics
from typing import NamedTuple

# Fewer usable pairs than this and no verdict is given: two ratios give no spread worth the name.
MIN_PAIRS = 3

# Student's t, one-sided 95%, for 1 to 30 degrees of freedom (a table: no scipy here).
_T95 = (6.314, 2.920, 2.353, 2.132, 2.015, 1.943, 1.895, 1.860, 1.833, 1.812,
        1.796, 1.782, 1.771, 1.761, 1.753, 1.746, 1.740, 1.734, 1.729, 1.725,
        1.721, 1.717, 1.714, 1.711, 1.708, 1.706, 1.703, 1.701, 1.699, 1.697)  # fmt: skip


def t95(df: int) -> float:
    """Student's t quantile at 0.95 for `df` degrees of freedom (30's beyond the table: a
    little wide, never narrow)."""
    return _T95[min(df, len(_T95)) - 1]


class Decision(NamedTuple):
    """The verdict, the 90% interval of the ratio (None with under two ratios) and, where the
    spread seen leaves it undecided, about how many pairs would decide (None: unknown)."""

    verdict: str
    low: float | None
    high: float | None
    needed: int | None


def decide(ratios: list[float], tolerance: float) -> Decision:
    """The verdict on the usable pairs' ratios (toolkit over bare) at `tolerance` (0.05: 5%)."""
    if len(ratios) < 2:
        return Decision("inconclusive", None, None, None)
    logs = [math.log(r) for r in ratios]
    mean, spread = statistics.fmean(logs), statistics.stdev(logs)
    half = t95(len(logs) - 1) * spread / math.sqrt(len(logs))
    low, high = mean - half, mean + half
    upper, lower = math.log(1 + tolerance), math.log(1 - tolerance)
    decided = len(ratios) >= MIN_PAIRS
    if decided and lower <= low and high <= upper:
        verdict = "within"
    elif decided and (low > upper or high < lower):
        verdict = "outside"
    else:
        verdict = "inconclusive"
    needed = None
    margin = min(abs(upper - mean), abs(mean - lower))  # the mean's distance to the nearer bound
    if verdict == "inconclusive" and spread > 0 and margin > 0:
        needed = max(MIN_PAIRS, math.ceil((t95(30) * spread / margin) ** 2))
    return Decision(verdict, math.exp(low), math.exp(high), needed)
