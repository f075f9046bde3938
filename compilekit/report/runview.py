"""Tables for the terminal: one cell's numbers, a run's kernel map, and a diff of two runs."""

from __future__ import annotations

import os
import re

from tabulate import tabulate

from compilekit.evidence import codecost, roofline
from compilekit.model import kernelfile
from compilekit.model import result as results
from compilekit.model.errors import UserError
from compilekit.model.store import CorruptFile, kept


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


def _roofline_cells(r: dict, notes: list[str]) -> list[str]:
    """GB/s, TFLOP/s (each with its share of the ceiling) and the bound of one kernel; a figure
    whose bytes or FLOPs did not come from the profiler is marked [a], [b], ... after its
    source, which `notes` collects (one line each, in order of first use)."""
    roof = r.get("roofline") or {}
    gbps, tflops = roof.get("gbps"), roof.get("tflops")
    return [
        "-" + _unknown(r.get("bytes_unknown"), notes)
        if gbps is None
        else f"{gbps:,.0f} ({roof['bandwidth_share']:.0%})"
        + _mark(r.get("bytes_from"), "bytes", notes),
        "-"
        if tflops is None
        else f"{tflops:.1f} ({roof['compute_share']:.0%})"
        + _mark(r.get("flops_from"), "FLOPs", notes),
        roof.get("bound") or "-",
    ]


def source_note(what: str, source: str) -> str:
    """ "bytes from its call in Inductor's output code": where a figure not from the profiler
    came from, as the notes under the kernel table and the run page's tooltip say it."""
    return f"{what} from {source}"


def _mark(source: str | None, what: str, notes: list[str]) -> str:
    return _noted(source_note(what, source), notes) if source else ""


def _unknown(why: str | None, notes: list[str]) -> str:
    """The mark of a kernel that has no bytes, with its reason as the note (kernels.json's
    bytes_unknown_at names the tensor)."""
    if not why:
        return ""
    line = f"no bytes: {why}"
    if why == codecost.UNSIZED:
        line += " (kernels.json's bytes_unknown_at names it and why)"
    return _noted(line, notes)


def _noted(line: str, notes: list[str]) -> str:
    """The mark of a note under the table (" [a]"), the note added to `notes` on first use."""
    if line not in notes:
        notes.append(line)
    return f" {_label(notes.index(line))}"


def _label(index: int) -> str:
    """[a], [b], ...: the mark of the index-th source note, in the table and under it."""
    return f"[{chr(ord('a') + index)}]"


def autotune_tables(result) -> str:
    """max-autotune's choices per tuned op, fastest first, as the cold compile timed them."""
    parts = []
    for op in result.autotune or []:
        rows = [
            [
                c["name"],
                _fmt(c["ms"]),
                f"{op['choices'][0]['ms'] / c['ms']:.0%}" if c["ms"] else "-",
                c["description"][:70],
            ]
            for c in op["choices"]
        ]
        parts.append(
            f"max-autotune {op['op']}({op['sizes']}), timed in the cold compile:\n"
            + tabulate(rows, headers=["choice", "ms", "speed vs winner", "config"])
        )
    return "\n\n".join(parts)


def load_run(run_dir: str):
    """The CellResult and kernels.json of a run directory; anything missing, old or corrupt is
    a user error naming the file."""
    result = results.read_run(run_dir)
    return result, load_kernel_map(run_dir, result)


def load_kernel_map(run_dir: str, result) -> dict:
    """A run directory's kernels.json; missing or unreadable is a user error naming why."""
    kernels_path = kept(os.path.join(run_dir, "kernels.json"))
    if not os.path.isfile(kernels_path):
        raise results.missing_figures(run_dir, result, "kernel map", "kernels.json")
    try:
        return kernelfile.load(kernels_path)
    except CorruptFile as exc:
        raise UserError(f"{exc}: run the cell again") from None


def _lines(rec: dict, limit: int = 3) -> str:
    shown = [f"{os.path.basename(ln['file'])}:{ln['line']}" for ln in rec["source_lines"][:limit]]
    more = len(rec["source_lines"]) - limit
    return ", ".join(shown) + (f" +{more}" if more > 0 else "")


def kernels_view(run_dir: str, kernel: str | None = None) -> str:
    """The kernel map as a table, or one kernel's source with the lines it came from."""
    result, kmap = load_run(run_dir)
    if kernel:
        return _one_kernel(run_dir, kmap, kernel)
    notes: list[str] = []  # where a figure's bytes or FLOPs came from, if not the profiler
    rows = [
        [
            r["name"][:60],
            r["kind"],
            _fmt(r["calls_per_forward"], 2),
            _fmt(r["device_ms"]),
            f"{r['share']:.0%}",
            ", ".join(r["aten_ops"])[:40],
            _lines(r),
            *_roofline_cells(r, notes),
            r["source_via"],
        ]
        for r in kmap["kernels"]
    ]
    head = (
        f"{result.variant} / {result.mode} / {result.shape} {result.dtype} "
        f"{result.device}: {kmap['kernels_per_forward']:g} kernels per forward, "
        f"{kmap['forward_device_ms']:.3f} ms busy per forward"
        + (f" (host {kmap['forward_host_ms']:.3f} ms)" if "forward_host_ms" in kmap else "")
        + ", measured latency "
        f"{result.compiled_ms or 0:.3f} ms"
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
            "GB/s (of peak)",
            "TFLOP/s (of peak)",
            "bound",
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
    table += "".join(f"\n{_label(i)} {note}" for i, note in enumerate(notes))
    if any(roofline.over_ceiling(r.get("roofline") or {}) for r in kmap["kernels"]):
        table += f"\n{roofline.OVER_CEILING}"
    if result.roofline:  # the split of the forward's time over the bound column's classes
        table += f"\n{result.roofline}"
    tuned = autotune_tables(result)
    return f"{head}\n\n{table}\n\n{inverse}" + (f"\n\n{tuned}" if tuned else "")


def kernel_ids(kmap: dict) -> list[str]:
    """A name per kernel record that selects it alone: the kernel's name, or `name#n` (its
    n-th launch site in the forward) where several records share a name (two aten::bmm)."""
    names = [r["name"] for r in kmap["kernels"]]
    seen: dict[str, int] = {}
    ids = []
    for name in names:
        if names.count(name) > 1:
            ids.append(f"{name}#{seen.get(name, 0)}")
            seen[name] = seen.get(name, 0) + 1
        else:
            ids.append(name)
    return ids


def _one_kernel(run_dir: str, kmap: dict, kernel: str) -> str:
    ids = kernel_ids(kmap)
    picked = [i for i, k in enumerate(ids) if k == kernel] or [
        i for i, k in enumerate(ids) if kernel in k
    ]
    if len(picked) != 1:
        raise UserError(
            f"kernel {kernel!r} {'is ambiguous' if picked else 'not in this run'}: "
            f"choose one of {', '.join(ids[i] for i in picked) if picked else ', '.join(ids)}"
        )
    rec = kmap["kernels"][picked[0]]
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


def diff_rows(run_a: str, run_b: str, rel_tol: float = 0.10) -> dict:
    """The diff of two runs as data: {"a", "b" (CellResults), "ka", "kb" (kernel maps), "rows"
    ({change, kernel, a_ms, b_ms}: kernels that appear, vanish, or change their per-forward
    time by more than rel_tol, the costliest first), "config" and "differs" (notes)}."""
    (ra, ka), (rb, kb) = load_run(run_a), load_run(run_b)
    a, b = _per_forward(ka), _per_forward(kb)
    rows = []
    for name in sorted(set(a) | set(b), key=lambda n: -max(a.get(n, 0), b.get(n, 0))):
        if name not in b:
            rows.append({"change": "vanished", "kernel": name, "a_ms": a[name], "b_ms": None})
        elif name not in a:
            rows.append({"change": "appeared", "kernel": name, "a_ms": None, "b_ms": b[name]})
        elif abs(b[name] - a[name]) > rel_tol * max(a[name], 1e-9):
            rows.append({"change": "changed", "kernel": name, "a_ms": a[name], "b_ms": b[name]})
    config = ""
    if ra.config != rb.config:
        keys = sorted(set(ra.config) | set(rb.config))
        changed = ", ".join(
            f"{k}: {ra.config.get(k, 'default')} -> {rb.config.get(k, 'default')}"
            for k in keys
            if ra.config.get(k, "default") != rb.config.get(k, "default")
        )
        config = f"config A {ra.config_name or 'base'} vs B {rb.config_name or 'base'}: {changed}"
    differs = [
        f"{what} {getattr(ra, what)} vs {getattr(rb, what)}"
        for what in ("shape", "dtype", "device")
        if getattr(ra, what) != getattr(rb, what)
    ]
    return {
        "a": ra,
        "b": rb,
        "ka": ka,
        "kb": kb,
        "rows": rows,
        "config": config,
        "differs": differs,
        "rel_tol": rel_tol,
    }


def diff_view(run_a: str, run_b: str, rel_tol: float = 0.10) -> str:
    """Kernels that appear, vanish, or change per-forward time by more than rel_tol."""
    diff = diff_rows(run_a, run_b, rel_tol)
    ra, rb, ka, kb = diff["a"], diff["b"], diff["ka"], diff["kb"]
    label = lambda r: f"{r.variant}/{r.mode}"  # noqa: E731
    head = (
        f"A = {label(ra)} ({ka['kernels_per_forward']:g} kernels, "
        f"{ra.compiled_ms or 0:.3f} ms)"
        f"   B = {label(rb)} ({kb['kernels_per_forward']:g} kernels, "
        f"{rb.compiled_ms or 0:.3f} ms)"
    )
    if diff["config"]:
        head += "\n" + diff["config"]
    if diff["differs"]:
        head += (
            f"\nnote: A and B differ in {', '.join(diff['differs'])}: kernel times compare "
            "different problems"
        )
    if not diff["rows"]:
        return head + f"\nno kernel appeared, vanished or changed by more than {rel_tol:.0%}"
    rows = [
        [r["change"], r["kernel"][:70], _fmt(r["a_ms"]), _fmt(r["b_ms"])] for r in diff["rows"]
    ]
    return head + "\n" + tabulate(rows, headers=["change", "kernel", "A ms/fwd", "B ms/fwd"])
