"""A comparison (report/compare.py) as a terminal table, as Markdown for a pull request's
comment, or as JSON; with the gates' failures when `compilekit check` ran them."""

from __future__ import annotations

import json

from tabulate import tabulate

CONTRACT = (  # (figure, column): beside each cell's time, BASE -> NEW where they differ
    ("compile_cold_s", "cold s"),
    ("compile_warm_s", "warm s"),
    ("kernels", "kernels"),
    ("graph_breaks", "breaks"),
    ("recompiles", "recompiles"),
    ("cudagraph_skips", "CG skips"),
    ("input_copies", "copies"),
    ("peak_mb", "peak MB"),
)


def render(comparison: dict, fmt: str = "table", failed: list | None = None) -> str:
    """The comparison in fmt: table, markdown or json. failed: the gates' lines (check)."""
    if fmt == "json":
        return json.dumps(as_data(comparison, failed), indent=1)
    rows = [_row(p) for p in comparison["pairs"]]
    headers = ["cell", "BASE ms", "NEW ms", "NEW/BASE (95%)", "verdict", *(c for _, c in CONTRACT)]
    table = tabulate(rows, headers=headers, tablefmt="github" if fmt == "markdown" else "simple")
    out = [_title(comparison, fmt), "", table] if rows else [_title(comparison, fmt)]
    for key, words in (("only_base", "only in BASE"), ("only_new", "only in NEW")):
        if comparison[key]:
            out += ["", f"{words} ({len(comparison[key])}): " + ", ".join(comparison[key])]
    out += [""] + comparison["notes"] if comparison["notes"] else []
    if failed is not None:
        out += ["", f"gates: {len(failed)} failed" if failed else "gates: all passed"]
        out += [f"- {line}" for line in failed]
    return "\n".join(out)


def _title(comparison: dict, fmt: str) -> str:
    counts = {}
    for p in comparison["pairs"]:
        counts[p.verdict] = counts.get(p.verdict, 0) + 1
    text = f"{len(comparison['pairs'])} cells on both sides: " + (
        ", ".join(f"{n} {v}" for v, n in sorted(counts.items())) or "none"
    )
    return f"**compilekit compare**: {text}" if fmt == "markdown" else text


def _row(pair) -> list:
    b, n = pair.figures("base"), pair.figures("new")
    interval = (
        f"{pair.ratio:.3f} ({pair.low:.2f}-{pair.high:.2f})" if pair.ratio is not None else "-"
    )
    verdict = pair.verdict + (f" ({pair.why})" if pair.why else "")
    return [pair.label, _num(pair.base_ms), _num(pair.new_ms), interval, verdict,
            *(_change(b.get(k), n.get(k)) for k, _ in CONTRACT)]  # fmt: skip


def _num(x) -> str:
    if x is None:
        return "-"
    return f"{x:.4g}" if isinstance(x, float) else str(x)


def _change(a, b) -> str:
    return _num(b) if _num(a) == _num(b) else f"{_num(a)} -> {_num(b)}"


def as_data(comparison: dict, failed: list | None = None) -> dict:
    """The comparison as plain data (--format json)."""
    cells = [
        {
            "cell": p.label,
            "base_ms": p.base_ms,
            "new_ms": p.new_ms,
            "ratio": p.ratio,
            "ratio_95": [p.low, p.high] if p.ratio is not None else None,
            "verdict": p.verdict,
            "why": p.why,
            "host_bound": p.host_bound,
            "status": [p.base.status, p.new.status],
            "base": p.figures("base"),
            "new": p.figures("new"),
            "kernels_new": p.kernels_new,
            "kernels_gone": p.kernels_gone,
        }  # fmt: skip
        for p in comparison["pairs"]
    ]
    data = {"cells": cells, "only_base": comparison["only_base"],
            "only_new": comparison["only_new"], "notes": comparison["notes"]}  # fmt: skip
    if failed is not None:
        data["gates_failed"] = failed
    return data
