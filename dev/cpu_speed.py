"""The CPU's speed now, as ns per step of a fixed pure-Python loop: a probe for investigations
of host-bound timings on VMs whose CPU changes speed (not used by the package)."""

import time

LOOP_STEPS = 20_000
ROUNDS = 5


def loop_ns(steps: int = LOOP_STEPS, rounds: int = ROUNDS) -> float:
    """The best of `rounds` rounds of a `steps`-step loop, in ns per step."""
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter_ns()
        total = 0
        for i in range(steps):
            total += i
        best = min(best, (time.perf_counter_ns() - start) / steps)
    return best


def speed_span(ns: list[float]) -> str:
    """'49-54': the range of probe readings."""
    return f"{min(ns):.0f}-{max(ns):.0f}"
