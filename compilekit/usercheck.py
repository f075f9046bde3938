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


NOISE_HELP = "what two processes of unchanged code differ by (default: 2%% CUDA, 100%% CPU)"


def add_gate_commands(sub) -> None:
    """The `compare` and `check` subcommands of the command line: two measurements side by
    side, and a CI job's regression gate."""
    cmp = sub.add_parser(
        "compare", help="two runs, sweeps or published folders: each cell's ratio and verdict"
    )
    cmp.add_argument("base", help="a run, sweep or published folder (BASE)")
    cmp.add_argument("new", help="the same for NEW")
    cmp.add_argument("--format", default="table", help="table (default), markdown or json")
    cmp.add_argument("--noise-floor", metavar="SHARE", help=NOISE_HELP)
    cmp.set_defaults(func=cmd_compare)
    chk = sub.add_parser(
        "check", help="run an experiment and gate it against a baseline (exit 1: regressed)"
    )
    chk.add_argument("experiment")
    chk.add_argument("--baseline", required=True, help="a sweep or published folder of it")
    chk.add_argument("--out", default=None, help="default: runs/<experiment name> (resumed)")
    chk.add_argument("--format", default="table", help="table (default), markdown or json")
    chk.add_argument("--per-gpu", type=int, default=4, help="cell processes per GPU (4)")
    chk.add_argument("--max-slowdown", metavar="SHARE", help="e.g. 5%%: slower, beyond noise")
    chk.add_argument("--max-graph-breaks", metavar="N", help="breaks beyond the baseline's")
    chk.add_argument("--max-recompiles", metavar="N", help="recompiles beyond the baseline's")
    chk.add_argument("--no-new-kernels", action="store_true", help="no kernel the baseline lacks")
    chk.add_argument("--max-peak-memory-growth", metavar="SHARE", help="e.g. 10%%")
    chk.add_argument(
        "--gate-host-bound", action="store_true", help="gate host-bound cells' time too"
    )
    chk.add_argument("--noise-floor", metavar="SHARE", help=NOISE_HELP)
    chk.set_defaults(func=cmd_check)


def cmd_compare(args) -> int:
    """`compilekit compare BASE NEW`: the comparison printed; exit 0."""
    floor = _given(gates.share, args.noise_floor, "--noise-floor")
    print(compare_dirs(args.base, args.new, args.format, floor))
    return 0


def cmd_check(args) -> int:
    """`compilekit check EXPERIMENT --baseline DIR`: exit 1 when a gate fails."""
    gate = gates.Gates(
        max_slowdown=_given(gates.share, args.max_slowdown, "--max-slowdown"),
        max_graph_breaks=_given(gates.count, args.max_graph_breaks, "--max-graph-breaks"),
        max_recompiles=_given(gates.count, args.max_recompiles, "--max-recompiles"),
        no_new_kernels=args.no_new_kernels,
        max_peak_memory_growth=_given(
            gates.share, args.max_peak_memory_growth, "--max-peak-memory-growth"
        ),
        gate_host_bound=args.gate_host_bound,
    )
    floor = _given(gates.share, args.noise_floor, "--noise-floor")
    text, failed = check(
        args.experiment, args.baseline, gate, args.out, args.format, args.per_gpu, floor
    )
    print(text)
    return 1 if failed else 0


def _given(parse, text: str | None, flag: str):
    """parse(text, flag) for a flag the user gave, None for one left out."""
    return None if text is None else parse(text, flag)
