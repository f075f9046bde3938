"""A comparison's gates (`compilekit check`): which figure of which cell regressed beyond
what the gate allows. Each gate is optional; a cell that was correct and is no longer fails
whatever the gates.

- max_slowdown: the cell is significantly slower (its interval above 1) and its ratio beyond
  1 + max_slowdown;
- max_graph_breaks, max_recompiles: more than N beyond the baseline's count;
- no_new_kernels: a kernel NEW's map has that BASE's has not (names without Inductor's
  counters);
- max_peak_memory_growth: peak memory beyond the baseline's by more than that share.
Host-bound cells pass the time gate by unless gate_host_bound: their time is the host's.
The compile-contract gates read counts that do not depend on the device or its speed.
"""

from __future__ import annotations

import dataclasses

from compilekit.model.errors import UserError


@dataclasses.dataclass
class Gates:
    max_slowdown: float | None = None
    max_graph_breaks: int | None = None
    max_recompiles: int | None = None
    no_new_kernels: bool = False
    max_peak_memory_growth: float | None = None
    gate_host_bound: bool = False

    def band(self, default: float) -> float:
        """The 'same' band of the verdicts: the time gate where it is the tighter."""
        return min(default, self.max_slowdown) if self.max_slowdown else default


def share(text: str, option: str) -> float:
    """'5%' or '0.05' as 0.05; anything else a UserError naming the option."""
    try:
        value = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except (ValueError, AttributeError):
        value = -1.0
    if not 0 <= value < 10:
        raise UserError(f"{option} {text!r}: give a share such as 5% or 0.05")
    return value


def count(text: str, option: str) -> int:
    """A non-negative whole number, or a UserError naming the option."""
    if not str(text).isdigit():
        raise UserError(f"{option} {text!r}: give a whole number, 0 or more")
    return int(text)


def failures(comparison: dict, gates: Gates) -> list[str]:
    """One line per cell and gate that failed, in the comparison's order."""
    out = []
    for pair in comparison["pairs"]:
        out += [f"{pair.label}: {line}" for line in _cell(pair, gates)]
    return out


def _cell(pair, gates: Gates) -> list[str]:
    if pair.base.ok and not pair.new.ok:
        return [f"was {pair.base.status}, now {pair.new.status}: {pair.new.reason or ''}"[:300]]
    out = []
    if gates.max_slowdown is not None and pair.verdict == "slower":
        if pair.ratio > 1 + gates.max_slowdown and (gates.gate_host_bound or not pair.host_bound):
            out.append(
                f"{pair.ratio:.2f}x the baseline's time (95% {pair.low:.2f}-{pair.high:.2f}), "
                f"beyond --max-slowdown {gates.max_slowdown:.0%}"
            )
    b, n = pair.figures("base"), pair.figures("new")
    for key, limit, option in (
        ("graph_breaks", gates.max_graph_breaks, "--max-graph-breaks"),
        ("recompiles", gates.max_recompiles, "--max-recompiles"),
    ):
        if limit is not None and (n.get(key) or 0) - (b.get(key) or 0) > limit:
            out.append(
                f"{key.replace('_', ' ')} {b.get(key) or 0} -> {n.get(key)}, more than {limit} "
                f"beyond the baseline's ({option})"
            )
    if gates.no_new_kernels and pair.kernels_new:
        shown = ", ".join(pair.kernels_new[:3]) + (" ..." if len(pair.kernels_new) > 3 else "")
        out.append(f"{len(pair.kernels_new)} new kernel(s): {shown} (--no-new-kernels)")
    growth = gates.max_peak_memory_growth
    if growth is not None and b.get("peak_mb") and n.get("peak_mb"):
        if n["peak_mb"] > b["peak_mb"] * (1 + growth):
            out.append(
                f"peak memory {b['peak_mb']:.1f} -> {n['peak_mb']:.1f} MB, beyond "
                f"--max-peak-memory-growth {growth:.0%}"
            )
    return out
