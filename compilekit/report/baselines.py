"""Cells against baselines at the same shape: an experiment's `[against]` table, checked, and the
report section it asks for; and, from the same sweep.json, whether the sweep finished.

    [against]
    "triton-flash" = ["sdpa-cudnn:eager", "flex:default"]

Each measured, correct cell of `triton-flash` (any mode) is set beside the `sdpa-cudnn` eager
cell and the `flex` default cell of the same shape and dtype (without configs or passes): its
time, its TFLOP/s and baseline ms / its ms per baseline (above 1.00: faster than the baseline).
A baseline "sdpa-cudnn:same" is the sdpa-cudnn cell in the compared cell's own mode: compiled
beside compiled, eager beside eager.
"""

from __future__ import annotations

import os
import sys

from compilekit.model.experiment import SAME_MODE, parse_baseline
from compilekit.model.spec import parse_shape


def read_sweep(out_dir: str):
    """The sweep's sweep.json as parsed; None where there is none (cells run one by one, or a
    sweep from before it was kept); CorruptFile where it cannot be read."""
    from compilekit.model.store import read_json

    path = os.path.join(out_dir, "sweep.json")
    return read_json(path) if os.path.isfile(path) else None


def load(out_dir: str, log=None) -> dict:
    """The sweep's [against] table from its sweep.json; {} where there is none (no sweep.json,
    or one from before it was kept). A sweep.json that cannot be read is said on `log`."""
    log = log or sys.stderr  # the stderr of the call, not of the import
    from compilekit.model.store import CorruptFile

    try:
        sweep = read_sweep(out_dir)
        table = {} if sweep is None else sweep.get("against") or {}
        return {variant: [parse_baseline(b) for b in bs] for variant, bs in table.items()}
    except (CorruptFile, AttributeError, TypeError) as exc:
        print(f"compilekit: {exc}; the report leaves out its [against] section", file=log)
        return {}


def _shape_order(r) -> tuple:
    """Head dim, then S, then batch and heads; then mode, so a shape's cells read together."""
    shape = parse_shape(r.shape)
    return (shape.head_dim, shape.seq, shape.batch, shape.heads, r.mode, r.config_name)


def _ratio(base, r) -> str:
    return f"{base.compiled_ms / r.compiled_ms:.2f}x" if base else "-"


def _name(baseline: str, mode: str) -> str:
    return f"{baseline} (its mode)" if mode == SAME_MODE else f"{baseline} {mode}"


def comparisons(results: list, against: dict) -> list[dict]:
    """Per compared variant: its baselines' names and a row per correct cell of it (by head dim,
    then S): the cell, its TFLOP/s text and one ratio text per baseline ('-' where the baseline
    has no correct cell, without configs or passes, at that shape and dtype)."""
    plain = {
        (r.variant, r.mode, r.shape, r.dtype): r
        for r in results
        if r.ok and not r.config and not r.passes
    }
    tables = []
    for variant, pairs in against.items():
        cells = sorted((r for r in results if r.variant == variant and r.ok), key=_shape_order)
        rows = [
            (
                r,
                f"{r.tflops:.0f}" if r.tflops else "-",
                [
                    _ratio(plain.get((b, r.mode if m == SAME_MODE else m, r.shape, r.dtype)), r)
                    for b, m in pairs
                ],
            )
            for r in cells
        ]
        tables.append(
            {"variant": variant, "baselines": [_name(b, m) for b, m in pairs], "rows": rows}
        )
    return tables


INTRO = (
    "Each correct cell beside the baselines the experiment names (`[against]`) at the same shape "
    "and dtype: baseline ms / its ms, so above 1.00x it is the faster; `-` where the baseline has "
    "no correct measurement there; `(its mode)`: the baseline's cell in the compared cell's own "
    "mode."
)


def section(results: list, against: dict) -> list[str]:
    """REPORT.md's lines: one table per compared variant. Empty when nothing is compared."""
    tables = comparisons(results, against)
    if not tables:
        return []
    from compilekit.report.cellview import cell_name

    lines = ["## Against baselines, per shape", "", INTRO, ""]
    for table in tables:
        names = [f"x {b}" for b in table["baselines"]]
        lines += [
            f"### {table['variant']}",
            "",
            "| cell | ms | TFLOP/s | " + " | ".join(names) + " |",
            "|---|---|---|" + "---|" * len(names),
        ]
        lines += [
            f"| {cell_name(r)} | {r.compiled_ms:.4f} | {tflops} | " + " | ".join(ratios) + " |"
            for r, tflops, ratios in table["rows"]
        ] or ["| (no correct cell) | - | - | " + " | ".join("-" for _ in names) + " |"]
        lines.append("")
    return lines


def unfinished(out_dir: str, stored: int) -> list[str]:
    """A line saying the sweep stopped before its last cell, where its sweep.json says so (one
    that cannot be read is said by load)."""
    from compilekit.model.store import CorruptFile

    try:
        sweep = read_sweep(out_dir)
    except CorruptFile:
        return []
    if not isinstance(sweep, dict) or sweep.get("complete", True):
        return []
    path, cells = sweep.get("path"), sweep.get("cells")
    if isinstance(cells, int) and stored >= cells:  # stopped in its last step, not before a cell
        return [
            f"**Not finished:** every cell of `{path}` is here, but the sweep stopped before "
            "running again, alone, the cells that were noisy or out of memory beside others; "
            f"`compilekit sweep {path} --out` this folder `--retry-failed --retry-noisy` runs "
            "those again.",
            "",
        ]
    return [
        f"**Not finished:** {stored} of the {cells} cells of `{path}` are here; "
        f"`compilekit sweep {path} --out` this folder runs the rest.",
        "",
    ]
