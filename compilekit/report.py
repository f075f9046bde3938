"""Tables for the terminal: one cell's numbers, a run's kernel map, and a diff of two runs."""

from __future__ import annotations

import os
import re

from tabulate import tabulate

from compilekit import kernelfile
from compilekit import result as results
from compilekit.errors import UserError
from compilekit.roofline import NONE_PLACED
from compilekit.store import CorruptFile
from compilekit.sweepreport import _num


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


def cell_table(results: list) -> str:
    """One row per cell, the same columns as a sweep's report (one table, one set of rules)."""
    from compilekit import sweepreport

    return tabulate(sweepreport.rows(results, None), headers=sweepreport.headers(results))


def cell_summary(result) -> str:
    """One cell as a few short lines that fit a terminal (the wide table: `run --wide`); the
    same figures and rules as the table (sweepreport.rows)."""
    from compilekit import sweepreport

    row = dict(zip(sweepreport.headers([result]), sweepreport.rows([result], None)[0]))
    lines = [
        f"{result.variant} / {result.mode} / {result.shape} {result.dtype} {result.device}: "
        + result.status
        + (
            f" (max_rel_err {row['max_rel_err']} vs {result.reference})"
            if result.reference
            else ""
        )
    ]
    if result.measured and result.eager_ms is None:  # eager could not run: compiled alone
        lines.append(
            f"latency     compiled {result.compiled_ms:.3f} ms; {result.eager_note}"
            + (" (noisy: see below)" if result.noisy else "")
        )
    elif result.measured:
        lines.append(
            f"latency     eager {result.eager_ms:.3f} ms -> compiled {result.compiled_ms:.3f} ms,"
            + _speedup_words(row["speedup"], result)
            + (" (noisy: see below)" if result.noisy else "")
        )
    if result.measured:
        if result.mode != "eager" and result.eager_ms is not None:
            pays = (
                f"pays off after {row['break_even_cold']} calls (cold), "
                f"{row['break_even_warm']} (warm)"
                if row["break_even_warm"] != "never"
                else "never pays off: compiled is not faster beyond the timing spread"
            )
            lines.append(f"compile     cold {row['cold_s']} s, warm {row['warm_s']} s; {pays}")
        lines.append(
            f"work        {row['TFLOP/s']} TFLOP/s, {row['kernels/fwd']} kernels per forward"
            + (f", GPU busy {row['GPU busy']}" if result.gpu_busy_share is not None else "")
        )
    return "\n".join(lines)


def _speedup_words(text: str, result) -> str:
    """' speedup 1.23x' (text: the table's), or a host-bound cell's loop speedup beside
    do_bench's."""
    if not result.paced_by_loop:
        return f" speedup {text}x"
    from compilekit.sweepreport import paced_speedup

    return (
        f" speedup {_num(paced_speedup(result), '.2f')}x in a loop (host-bound; do_bench's "
        f"{_num(result.speedup, '.2f')}x hides host time)"
    )


def _cpu_speed(result) -> str:
    """' (the CPU at 49-54 ns per probe step)': the speed a host figure was read at. The H200's
    VM switches between about 45 and 85, and a host figure follows it (cpuwatch.loop_ns)."""
    from compilekit.cpuwatch import speed_span

    speeds = (result.cpu_use or {}).get("loop_ns")
    return f" (the CPU at {speed_span(speeds)} ns per probe step)" if speeds else ""


def _host_beside_loop(result) -> str:
    """'; at one CPU speed, 0.070 ms issuing a call against 0.074 ms per call in the loop': the
    host's loops set beside the user's loops taken at the same speed (the two are taken a
    moment apart, and the H200's VM may change speed between them); '' where they carry no
    speeds or met none."""
    import statistics

    from compilekit import samespeed

    loops = result.loop_timing or {}
    user, host = (loops.get(k, {}).get("loops") for k in ("compiled", "host"))
    pairs = samespeed.at_same_speed(user, host) if user and host else []
    if not pairs:
        return ""
    return (
        f"; at one CPU speed, {statistics.median(h for h, _ in pairs):.3f} ms issuing a call "
        f"against {statistics.median(u for _, u in pairs):.3f} ms per call in the loop"
    )


def host_bound_text(result) -> str:
    """What a host-bound cell costs in a user's loop, beside do_bench's figures."""
    loop = result.compiled_loop_ms if result.paced_by_loop else None
    text = (
        f"host-bound: GPU busy {_num(result.gpu_busy_share, '.0%')} of each call "
        + ("in a loop " if loop else "")
        + f"({_num(result.profiled_forward_device_ms, '.3f')} of "
        f"{_num(loop or result.compiled_ms, '.3f')} ms); the "
        f"host spends {_num(result.host_ms_per_call, '.3f')} ms issuing a call{_cpu_speed(result)}"
        f"{_host_beside_loop(result)}: launches, guards and wrappers (reduce-overhead / CUDA "
        "graphs target this; see trace.json)"
    )
    if not loop:  # a run from before the loop was timed: do_bench's figure was its latency
        return text
    text += ". "
    if result.mode == "eager" or result.eager_loop_ms is None:  # no eager loop beside it
        return text + (
            f"do_bench reads {_num(result.compiled_ms, '.3f')} ms: its L2 flush hides host time"
        )
    from compilekit.sweepreport import paced

    eager, compiled = paced(result)  # over the loops both ran at one CPU speed, where known
    same = (
        f" at the same CPU speed (a probe at most {compiled['at_most_ns']:.0f} ns per step: "
        f"{eager['samples']} and {compiled['samples']} loops)"
        if "at_most_ns" in compiled
        else ""
    )
    return text + (
        f"In a loop{same}, eager {eager['median_ms']:.3f} vs compiled "
        f"{compiled['median_ms']:.3f} ms per call "
        f"({eager['median_ms'] / compiled['median_ms']:.2f}x); do_bench, whose L2 flush "
        f"hides host time, reads {result.eager_ms:.3f} vs {result.compiled_ms:.3f}"
    )


def cell_notes(result) -> list[str]:
    """The lines a reader must not miss: the verdict's reason, host-bound calls, disturbed
    timings, skipped CUDA graphs, the backend that ran, graph breaks and recompiles."""
    notes = []
    if result.config:
        notes.append(f"Inductor options ({result.config_name}): {result.config}")
    for spec, stats in (result.pass_stats or {}).items():
        matches = f", matches {stats['matches']}" if "matches" in stats else ""
        notes.append(
            f"pass {os.path.basename(spec)}: ran {stats['invocations']}x, changed "
            f"{stats['graphs_changed']} graph(s){matches} (in the capture's compile)"
        )
    if result.status in ("failed", "unsupported", "wrong") and result.reason:
        notes.append(f"{result.status}: {result.reason.splitlines()[0][:400]}")
    if result.eager_note:
        notes.append(result.eager_note)
    if result.status == "self-consistent":
        notes.append(
            "self-consistent: no `reference` in the variant's file, so compiled was checked "
            "against the same function on float64 inputs (not against a known-right answer)"
        )
    if result.host_bound:
        notes.append(host_bound_text(result))
    if result.timing_attempts:
        notes.append(retimed_text(result))
    if result.noisy:
        notes.append(f"noisy timing: {result.noise_note}; run the cell again on a quiet machine")
    cg = result.cudagraphs or {}
    if cg.get("requested"):
        notes.append(f"cudagraphs: {cg['note']}")
    notes += why_slow_lines(result)
    if result.mode != "eager" and result.compile_notes:
        notes.append(f"cold compile: {result.compile_notes.get('cold')}")
        if result.compile_notes.get("cache"):
            notes.append(f"cache: {result.compile_notes['cache']}")
        if result.compile_notes.get("capture"):
            notes.append(f"capture: {result.compile_notes['capture']}")
    if result.sdpa_backend:
        notes.append(f"SDPA backend that ran: {result.sdpa_backend}")
    if result.attention_rewrite:
        notes.append(result.attention_rewrite)
    dynamo = result.dynamo or {}
    if dynamo.get("graph_breaks"):
        notes.append(f"graph breaks: {dynamo['graph_breaks']}")
    if dynamo.get("recompiles"):
        notes.append(
            f"recompiles ({len(dynamo['recompiles'])}): " + "; ".join(dynamo["recompiles"][:3])
        )
    if result.attempts:
        notes.append(attempts_text(result))
    return notes


def attempts_text(r) -> str:
    """'kept in attempts/ beside this run: 1 failed run(s) (the last: REASON); 2 noisy
    timing(s) (the last: 0.094 ms, NOISE NOTE)'."""
    failed = [a for a in r.attempts if a["status"] == "failed"]
    noisy = [a for a in r.attempts if a["status"] == "noisy"]
    parts = []
    if failed:
        parts.append(f"{len(failed)} failed run(s) (the last: {failed[-1].get('reason')})")
    if noisy:
        last = noisy[-1]
        parts.append(
            f"{len(noisy)} noisy timing(s) (the last: {_num(last.get('compiled_ms'), '.4g')} "
            f"ms, {last.get('reason')})"
        )
    return "kept in attempts/ beside this run: " + "; ".join(parts)


def retimed_text(r) -> str | None:
    """'re-timed: 3 attempts, compiled medians 0.1032, 0.064, 0.063 ms; kept the quietest', or
    None when the timing was taken once."""
    if not r.timing_attempts:
        return None
    medians = ", ".join(f"{a['compiled_ms']:.4g}" for a in r.timing_attempts)
    return (
        f"re-timed: {len(r.timing_attempts)} attempts, compiled medians {medians} ms; kept the "
        "quietest"
    )


def why_slow_lines(result) -> list[str]:
    """The CUDA-graph replay's costs, the roofline split of device time, and max-autotune's
    winner per tuned op: what the run summary and REPORT.md say of why a cell was slow."""
    lines = [result.replay["note"]] if result.replay else []
    if result.roofline == NONE_PLACED:
        lines.append(result.roofline)
    elif result.roofline:
        lines.append(f"{result.roofline} (share of device time; `compilekit kernels` per kernel)")
    return lines + [autotune_line(op) for op in result.autotune or []]


def autotune_line(op: dict) -> str:
    """One tuned op: its winner, by how much, out of how many choices."""
    if not op.get("winner"):
        return f"max-autotune {op['op']}({op['sizes']}): no choice timed"
    best = op["choices"][0]
    margin = (
        f", {op['margin']:.2f}x faster than {op['choices'][1]['name']}" if op.get("margin") else ""
    )
    return (
        f"max-autotune {op['op']}({op['sizes']}): {best['name']} {best['ms']:.4f} ms won "
        f"of {len(op['choices'])} shown{margin}"
    )


def _roofline_cells(r: dict) -> list[str]:
    roof = r.get("roofline") or {}
    gbps = roof.get("gbps")
    return [
        "-" if gbps is None else f"{gbps:,.0f} ({roof['bandwidth_share']:.0%})",
        "-"
        if roof.get("tflops") is None
        else f"{roof['tflops']:.1f} ({roof['compute_share']:.0%})",
        roof.get("bound") or "-",
    ]


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
    result = load_result(run_dir)
    return result, load_kernel_map(run_dir, result)


def load_result(run_dir: str):
    """A run directory's CellResult; a missing, old or corrupt result.json is a user error."""
    if not os.path.isfile(os.path.join(run_dir, "result.json")):
        raise UserError(
            f"{run_dir!r} is not a run directory (no result.json): give a directory "
            "made by `compilekit run`"
        )
    try:
        return results.load(run_dir)
    except CorruptFile as exc:
        raise UserError(f"{exc}: run the cell again (FORCE=1 in a sweep)") from None


def load_kernel_map(run_dir: str, result) -> dict:
    """A run directory's kernels.json; missing or unreadable is a user error naming why."""
    kernels_path = os.path.join(run_dir, "kernels.json")
    if not os.path.isfile(kernels_path):
        why = result.reason or "no kernels.json"
        raise UserError(
            f"{run_dir!r} has no kernel map ({result.status}: {why.splitlines()[0][:200]}): "
            "run the cell again"
        )
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
    rows = [
        [
            r["name"][:60],
            r["kind"],
            _fmt(r["calls_per_forward"], 2),
            _fmt(r["device_ms"]),
            f"{r['share']:.0%}",
            ", ".join(r["aten_ops"])[:40],
            _lines(r),
            *_roofline_cells(r),
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
