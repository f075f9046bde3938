"""Tables for the terminal: one cell's numbers, a run's kernel map, and a diff of two runs."""

from __future__ import annotations

import json
import os
import re

from tabulate import tabulate

from compilekit.runner import RESULT_VERSION
from compilekit.spec import UserError


def _fmt(value, digits=3):
    if value is None:
        return "-"
    if isinstance(value, float):
        return (
            f"{value:.{digits}g}"
            if abs(value) < 1e-2 or abs(value) >= 1e4
            else f"{value:.{digits}f}"
        )
    return value


def cell_table(results: list[dict]) -> str:
    """One row per cell, the same columns as a sweep's report (one table, one set of rules)."""
    from compilekit import sweepreport

    return tabulate(sweepreport.rows(results, None), headers=sweepreport.HEADERS)


def cell_notes(result: dict) -> list[str]:
    """The lines a reader must not miss: errors, skipped CUDA graphs, the backend that ran."""
    notes = []
    if result.get("error"):
        notes.append(f"error: {result['error'].splitlines()[0][:300]}")
    if result.get("max_rel_err") is not None and not result.get("ok"):
        notes.append(
            f"WRONG: max_rel_err {result['max_rel_err']:.3g} (eager "
            f"{result.get('eager_max_rel_err', float('nan')):.3g}) exceeds the "
            f"{result['dtype']} bound {result.get('error_bound')}"
        )
    cg = result.get("cudagraphs") or {}
    if cg.get("requested"):
        notes.append(f"cudagraphs: {cg['note']}")
    if result.get("compile_cold_note") and result.get("mode") != "eager":
        notes.append(f"cold compile: {result['compile_cold_note']}")
    busy, latency = result.get("profiled_forward_device_ms"), result.get("compiled_ms")
    if result.get("device") == "cuda" and busy and latency and busy < 0.8 * latency:
        notes.append(
            f"the GPU is busy {busy:.3f} ms of the {latency:.3f} ms forward "
            f"({busy / latency:.0%}): the rest is CPU overhead (launches, guards, "
            "wrappers); see trace.json"
        )
    if result.get("sdpa_backend"):
        notes.append(f"SDPA backend that ran: {result['sdpa_backend']}")
    if result.get("attention_rewrite"):
        notes.append(result["attention_rewrite"])
    breaks = (result.get("dynamo") or {}).get("graph_breaks")
    if breaks:
        notes.append(f"graph breaks: {breaks}")
    return notes


def load_run(run_dir: str) -> tuple[dict, dict]:
    """result.json and kernels.json of a run directory; a missing or old one is a user error."""
    result_path = os.path.join(run_dir, "result.json")
    if not os.path.isfile(result_path):
        raise UserError(
            f"{run_dir!r} is not a run directory (no result.json): give a directory "
            "made by `compilekit run`"
        )
    with open(result_path) as f:
        result = json.load(f)
    if result.get("format_version") != RESULT_VERSION:
        raise UserError(
            f"{run_dir!r} was written by another compilekit format "
            f"({result.get('format_version')!r}, this one reads {RESULT_VERSION}): run "
            "the cell again"
        )
    kernels_path = os.path.join(run_dir, "kernels.json")
    if not os.path.isfile(kernels_path):
        why = result.get("unsupported") or result.get("error") or "no kernels.json"
        raise UserError(
            f"{run_dir!r} has no kernel map ({why.splitlines()[0][:200]}): run the cell again"
        )
    with open(kernels_path) as f:
        return result, json.load(f)


def _lines(rec: dict, limit: int = 3) -> str:
    shown = [f"{os.path.basename(ln['file'])}:{ln['line']}" for ln in rec["source_lines"][:limit]]
    more = len(rec["source_lines"]) - limit
    return ", ".join(shown) + (f" +{more}" if more > 0 else "")


def kernels_view(run_dir: str, kernel: str | None = None) -> str:
    """The kernel map as a table, or one kernel's source with the lines it came from."""
    result, kmap = load_run(run_dir)
    if kernel:
        return _one_kernel(run_dir, kmap, kernel)
    rows = [
        [
            r["name"][:60],
            r["kind"],
            _fmt(r["calls_per_forward"], 2),
            _fmt(r["device_ms"]),
            f"{r['share']:.0%}",
            ", ".join(r["aten_ops"])[:40],
            _lines(r),
            r["source_via"],
        ]
        for r in kmap["kernels"]
    ]
    head = (
        f"{result['variant']} / {result['mode']} / {result['shape']} {result['dtype']} "
        f"{result['device']}: {kmap['kernels_per_forward']:g} kernels per forward, "
        f"{kmap['forward_device_ms']:.3f} ms busy per forward"
        + (f" (host {kmap['forward_host_ms']:.3f} ms)" if "forward_host_ms" in kmap else "")
        + ", measured latency "
        f"{result.get('compiled_ms', 0):.3f} ms"
    )
    table = tabulate(
        rows,
        headers=[
            "kernel",
            "kind",
            "calls/fwd",
            "ms/call",
            "share",
            "aten ops",
            "source lines",
            "via",
        ],
    )
    by_line = [
        [
            f"{os.path.basename(r['file'])}:{r['line']}",
            r["code"][:50],
            _fmt(r["attributed_ms"]),
            ", ".join(k[:40] for k in r["kernels"]),
        ]
        for r in kmap["by_source_line"]
    ]
    inverse = tabulate(by_line, headers=["source line", "code", "attributed_ms/fwd", "kernels"])
    return f"{head}\n\n{table}\n\n{inverse}"


def _one_kernel(run_dir: str, kmap: dict, kernel: str) -> str:
    matches = [r for r in kmap["kernels"] if r["name"] == kernel] or [
        r for r in kmap["kernels"] if kernel in r["name"]
    ]
    if len(matches) != 1:
        names = ", ".join(r["name"] for r in kmap["kernels"])
        raise UserError(
            f"kernel {kernel!r} {'is ambiguous' if matches else 'not in this run'}: "
            f"choose one of {names}"
        )
    rec = matches[0]
    out = [
        f"{rec['name']} ({rec['kind']}, {rec['device_ms']:.4f} ms/call, "
        f"{rec['calls_per_forward']:g} calls/forward, via {rec['source_via']})",
        f"aten ops: {', '.join(rec['aten_ops']) or '-'}",
        "source lines:",
    ]
    out += [f"  {ln['file']}:{ln['line']}: {ln['code']}" for ln in rec["source_lines"]] or ["  -"]
    if rec.get("source_file"):
        with open(os.path.join(run_dir, rec["source_file"])) as f:
            out += ["", f"--- {rec['source_file']} ---", f.read()]
    else:
        out.append("(no generated source: this kernel comes from a library or an eager op)")
    return "\n".join(out)


def _per_forward(kmap: dict) -> dict[str, float]:
    """{kernel name: ms per forward}, names without Inductor's per-graph counter (`_0`, `_1`)
    so the same fused kernel matches across runs; same-named kernels are summed."""
    out: dict[str, float] = {}
    for r in kmap["kernels"]:
        name = (
            re.sub(r"_\d+$", "", r["name"])
            if r["name"].startswith(("triton_", "cpp_"))
            else r["name"]
        )
        out[name] = out.get(name, 0.0) + r["device_ms"] * r["calls_per_forward"]
    return out


def diff_view(run_a: str, run_b: str, rel_tol: float = 0.10) -> str:
    """Kernels that appear, vanish, or change per-forward time by more than rel_tol."""
    (ra, ka), (rb, kb) = load_run(run_a), load_run(run_b)
    a, b = _per_forward(ka), _per_forward(kb)
    rows = []
    for name in sorted(set(a) | set(b), key=lambda n: -max(a.get(n, 0), b.get(n, 0))):
        if name not in b:
            rows.append(["vanished", name[:70], _fmt(a[name]), "-"])
        elif name not in a:
            rows.append(["appeared", name[:70], "-", _fmt(b[name])])
        elif abs(b[name] - a[name]) > rel_tol * max(a[name], 1e-9):
            rows.append(["changed", name[:70], _fmt(a[name]), _fmt(b[name])])
    label = lambda r: f"{r['variant']}/{r['mode']}"  # noqa: E731
    head = (
        f"A = {label(ra)} ({ka['kernels_per_forward']:g} kernels, "
        f"{ra.get('compiled_ms', 0):.3f} ms)"
        f"   B = {label(rb)} ({kb['kernels_per_forward']:g} kernels, "
        f"{rb.get('compiled_ms', 0):.3f} ms)"
    )
    if not rows:
        return head + "\nno kernel appeared, vanished or changed by more than 10%"
    return head + "\n" + tabulate(rows, headers=["change", "kernel", "A ms/fwd", "B ms/fwd"])
