"""Regression gates from what a user typed: `compilekit compare BASE NEW` and `compilekit
check EXPERIMENT --baseline DIR` (docs/ci.md). Exit codes: 0 nothing gated regressed, 1 a
gated figure regressed beyond noise (or a correct cell went wrong or failed), 2 bad input."""

from __future__ import annotations

import os

from compilekit.model.errors import UserError
from compilekit.report import compare, compareview, gates

FORMATS = ("table", "markdown", "json")


def compare_dirs(base: str, new: str, fmt: str = "table", floor: float | None = None) -> str:
    """The comparison of BASE and NEW as text in fmt; floor: the between-process noise
    (default: compare.NOISE_FLOOR's for the device)."""
    _check_format(fmt)
    return compareview.render(compare.compare(base, new, floor=floor), fmt)


def check(
    experiment: str,
    baseline: str,
    gate: gates.Gates,
    out: str | None = None,
    fmt: str = "table",
    per_gpu: int = 4,
    floor: float | None = None,
) -> tuple[str, list[str]]:
    """Run (or resume) the experiment into out, then compare it with the baseline under the
    gates: (the comparison as text, the gates' failures)."""
    from compilekit.userexperiment import load_experiment
    from compilekit.usersweep import sweep

    _check_format(fmt)
    if not os.path.isdir(baseline):
        raise UserError(f"--baseline {baseline!r} is not a directory: give a sweep or a "
                        "published folder of this experiment")  # fmt: skip
    compare.load_side(baseline)  # unreadable or empty: said before the sweep runs
    name = load_experiment(experiment).name
    out = out or os.path.join("runs", name)
    if os.path.abspath(out) == os.path.abspath(baseline):
        raise UserError(f"--out {out!r} is the baseline: give the new run a folder of its own")
    sweep(experiment, out, per_gpu=per_gpu)
    comparison = compare.compare(baseline, out, gate.band(compare.BAND), floor)
    failed = gates.failures(comparison, gate)
    return compareview.render(comparison, fmt, failed), failed


def _check_format(fmt: str) -> None:
    if fmt not in FORMATS:
        raise UserError(f"--format {fmt!r}: choose {', '.join(FORMATS)}")
