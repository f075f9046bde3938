"""`compilekit report DIR`: a sweep's results as a terminal table, REPORT.md and plots."""

from __future__ import annotations

import os
import sys
from collections import defaultdict

from tabulate import tabulate

from compilekit.model import result as results_mod
from compilekit.model.errors import UserError
from compilekit.model.spec import parse_shape
from compilekit.model.store import CorruptFile, kept, read_json, write_text
from compilekit.report import baselines, decodeview, memoryview, worth
from compilekit.report.cellview import (
    _num,
    attempts_text,
    break_even_calls,
    cell_name,
    headers,
    host_bound_text,
    retimed_text,
    rows,
    speedup_text,
    why_slow_lines,
)
from compilekit.report.plots import plot, scaling_series, series_key


def load_results(out_dir: str, log=None) -> list[results_mod.CellResult]:
    """Every readable cell result under out_dir (one directory per cell); an unreadable one is
    skipped with one line on `log` naming the file."""
    log = log or sys.stderr  # the stderr of the call, not of the import
    if not os.path.isdir(out_dir):
        raise UserError(f"{out_dir!r} is not a directory: give the OUT of a sweep")
    found = []
    for name in sorted(os.listdir(out_dir)):
        run_dir = os.path.join(out_dir, name)
        if (
            ".tmp-" in name
            or ".old-" in name
            or not os.path.isfile(kept(os.path.join(run_dir, "result.json")))
        ):
            continue
        try:
            found.append(results_mod.load(run_dir))
        except CorruptFile as exc:
            print(f"compilekit: skipped {exc}", file=log)
    if not found:
        raise UserError(f"{out_dir!r} holds no cell results: run `make sweep` into it first")
    return found


def load_env(out_dir: str, log=None) -> dict:
    """A sweep's env.json ({} when there is none; an unreadable one is skipped with a line)."""
    log = log or sys.stderr  # the stderr of the call, not of the import
    path = os.path.join(out_dir, "env.json")
    if not os.path.isfile(path):
        return {}
    try:
        return read_json(path)
    except CorruptFile as exc:
        print(f"compilekit: skipped {exc}", file=log)
        return {}


def machine_mix(results: list) -> list[str]:
    """One line per distinct (GPU or CPU, torch, triton) among the cells, with how many cells
    each measured; empty when they all agree (a comparison of like with like)."""
    kinds = {}
    for r in results:
        if r.env:
            key = (r.env.get("gpu") or "CPU", r.env.get("torch"), r.env.get("triton"))
            kinds.setdefault(key, []).append(r.env.get("host"))
    if len(kinds) < 2:
        return []
    return [
        f"{gpu}, torch {torch}, triton {triton}: {len(hs)} cell(s) on {', '.join(sorted(set(hs)))}"
        for (gpu, torch, triton), hs in sorted(kinds.items(), key=lambda kv: str(kv[0]))
    ]


def against_seq(results: list) -> list[str]:
    """Markdown table rows: for each compiled series measured at 2+ sequence lengths, each S's
    latency, eager latency, speedup and break-even calls (cold / warm compile): how what
    compiling buys, and what it costs to earn back, moves with S."""
    groups = defaultdict(dict)
    for r in results:
        if r.ok and r.mode != "eager":
            groups[series_key(r)][parse_shape(r.shape).seq] = r
    out = []
    for key in sorted(groups):
        if len(groups[key]) < 2:
            continue
        for seq, r in sorted(groups[key].items()):
            cold = break_even_calls(r.compile_cold_s, r)
            warm = break_even_calls(r.compile_warm_s, r)
            pays = f"{f'{cold:,}' if cold else 'never'} / {f'{warm:,}' if warm else 'never'}"
            out.append(
                f"| {md_cell(key)} | {seq} | {r.compiled_ms:.4g} | {_num(r.eager_ms, '.4g')} | "
                f"{speedup_text(r)} | {pays if r.eager_ms is not None else '-'} |"
            )
    return out


def why_slow(results: list) -> list[str]:
    """Markdown bullets: each measured cell's replay, roofline and autotune lines."""
    out = []
    for r in results:
        lines = why_slow_lines(r)
        if lines and r.measured:
            out.append(f"- {cell_name(r)}: " + "; ".join(lines))
    return out


def report(out_dir: str) -> str:
    """Write REPORT.md (and plots) into out_dir; return the terminal table."""
    # grouped by config, then by cell, so one config's cells read together
    results = sorted(load_results(out_dir), key=lambda r: (r.config_name, r.label))
    env = load_env(out_dir)
    table = rows(results, env.get("ceilings", {}).get("matmul_tflops"))
    images = plot(results, out_dir)
    mix = machine_mix(results)
    md = _head(out_dir, env, mix, len(results)) + _cells_section(results, table)
    md += _series_sections(results) + baselines.section(results, baselines.load(out_dir))
    md += decodeview.section(results, cell_name) + _ops_section(results, out_dir)
    md += memoryview.section(results, cell_name)
    md += _note_sections(results) + _plot_lines(images)
    write_text(os.path.join(out_dir, "REPORT.md"), "\n".join(md))
    notes = f"\nwrote {os.path.join(out_dir, 'REPORT.md')}"
    if images:
        notes += f" and {', '.join(images)}"
    elif images is None:
        notes += " (plots skipped: matplotlib not installed)"
    else:
        notes += " (nothing to plot)"
    if mix:
        notes += "\nmixed machines (GPU model or torch/triton version): " + "; ".join(mix)
    configs = sorted({(r.config_name, repr(r.config)) for r in results if r.config})
    notes = "".join(f"\nconfig {name}: {config}" for name, config in configs) + notes
    return tabulate(table, headers=headers(results)) + notes


def _head(out_dir: str, env: dict, mix: list, stored: int) -> list[str]:
    """REPORT.md's title, a mixed-machines warning, the machine, whether the sweep finished."""
    md = [f"# compilekit report: {os.path.basename(os.path.abspath(out_dir))}", ""]
    if mix:
        md += (
            [
                "## Mixed machines: compare with care",
                "",
                "These cells were measured on different GPU models or torch/triton versions; the "
                "`node` column says where each ran:",
                "",
            ]
            + [f"- {line}" for line in mix]
            + [""]
        )
    if env:
        ceilings = env.get("ceilings", {})
        peak = _num(ceilings.get("matmul_tflops"), ".0f")
        md += [
            "## Machine",
            "",
            f"{env.get('gpu') or env.get('cpu')} ({env.get('device')}), torch {env.get('torch')}, "
            f"triton {env.get('triton')}, depyf {env.get('depyf')}, CUDA {env.get('cuda')}, "
            f"cuDNN {env.get('cudnn')}, driver {env.get('driver')}, Python {env.get('python')}.",
            f"Measured ceilings: {ceilings.get('matmul_dtype')} matmul "
            f"{peak} TFLOP/s (n={ceilings.get('matmul_n')}), "
            f"device copy {_num(ceilings.get('copy_gbps'), '.0f')} GB/s; `%peak` is TFLOP/s over "
            "that matmul ceiling.",
            "",
        ]
    return md + baselines.unfinished(out_dir, stored)


def _cells_section(results: list, table: list) -> list[str]:
    return [
        "## Cells",
        "",
        "Latency is the steady-state median (`compiled_ms`, the mode's; `eager_ms`, the same "
        "process's eager baseline). Break-even: calls after which the compile (cold: empty cache; "
        "warm: filled cache) has paid for itself; `never` when compiled is not faster than eager "
        "by more than the timing spread (compiled p90 under eager p10). TFLOP/s counts the FLOPs "
        "each variant declares (4·B·H·D per kept query-key pair: S(S+1)/2 causal, S·W - W(W-1)/2 "
        "for a window of W); `-` where a variant declares none. `GPU busy`: device time per "
        "forward over the latency; under 80%, with the host's time to issue a call at least half "
        "the loop's, the call is host-bound, and its speedup (marked `loop`) and break-even come "
        "from a user's loop of eager and of compiled calls (all of its loops). `noisy`: the timing"
        " spread, the machine's load or other processes' CPU use while it was timed (a core or a "
        "quarter of the machine's, whichever is more; a quarter of the timing thread's own core "
        "where a sweep gave it one; or as much stolen by the hypervisor) says it was disturbed; a "
        "cell whose timing was taken again after such a disturbance is named below."
        + (SHARES_WORDS if any(r.time_shares for r in results) else ""),
        "",
        tabulate([[md_cell(c) for c in row] for row in table], headers=headers(results),
                 tablefmt="github"),
        "",
    ]  # fmt: skip


SHARES_WORDS = (
    " `attention`: a model's share of its profiled device time spent in attention (its "
    "kernels, and the ops its attention code launched), from the kernel map; the summary of "
    "each cell splits the rest into matmuls, norms and activations, and other."
)


def md_cell(value):
    """A table cell of REPORT.md as text, not markup: a user's file name may hold HTML, and a
    '|' would end the cell."""
    if not isinstance(value, str):
        return value
    for raw, escaped in (("&", "&amp;"), ("<", "&lt;"), (">", "&gt;"), ("|", "\\|")):
        value = value.replace(raw, escaped)
    return value


def _series_sections(results: list) -> list[str]:
    """The fitted latency-vs-S exponent per series, and each compiled series at every S."""
    md = []
    scaling = scaling_series([r for r in results if r.ok])
    if scaling:
        md += [
            "## Scaling with sequence length",
            "",
            "| series | S range | fitted exponent |",
            "|---|---|---|",
        ]
        md += [
            f"| {md_cell(k)} | {xs[0]}-{xs[-1]} | {slope:.2f} |"
            for k, (xs, _, slope) in sorted(scaling.items())
        ]
        md.append("")
    per_seq = against_seq(results)
    if per_seq:
        md += (
            [
                "## Speedup and break-even against sequence length",
                "",
                "Each compiled series at every S it was measured at; break-even in calls (cold / "
                "warm compile; `never`: not faster by more than the timing spread).",
                "",
                "| series | S | compiled ms | eager ms | speedup | break-even cold / warm |",
                "|---|---|---|---|---|---|",
            ]
            + per_seq
            + [""]
        )
    return md


def _ops_section(results: list, out_dir: str) -> list[str]:
    """Each measured cell's costliest ops by time and by memory (its ops.json), with the
    forward's peak memory; nothing where no cell has an op cost matrix."""
    from compilekit.report import opsview

    lines = []
    for r in results:
        text = r.measured and opsview.summary_line(
            os.path.join(out_dir, r.label), r.device == "cuda"
        )
        if text:
            peak = f"; peak {r.peak_memory_mb:.4g} MiB" if r.peak_memory_mb is not None else ""
            lines.append(f"- {cell_name(r)}: {text}{peak}")
    if not lines:
        return []
    head = "## What each op costs (self time per forward; bytes it allocated itself)"
    return [head, "", *lines, "", opsview.READING, ""]


def _note_sections(results: list) -> list[str]:
    """Host-bound cells, why it was slow, cells not measured or not correct, other runs kept,
    disturbed timings: each section only where it has something to say."""
    problems = [
        f"- {cell_name(r)} {r.dtype}: {r.status}: "
        f"{(r.reason or '').splitlines()[0][:300] if r.reason else '-'}"
        for r in results
        if r.status in ("wrong", "unsupported", "failed")
    ] + [
        f"- {cell_name(r)} {r.dtype}: compiled only: {r.eager_note}"
        for r in results
        if r.eager_note
    ]
    attempts = [f"- {cell_name(r)}: {attempts_text(r)}" for r in results if r.attempts]
    host_bound = [f"- {cell_name(r)}: {host_bound_text(r)}" for r in results if r.host_bound]
    noisy = []
    for r in results:
        notes = [r.noise_note, retimed_text(r), worth.baseline_note(r, results)]
        if any(notes):
            noisy.append(f"- {cell_name(r)}: " + "; ".join(filter(None, notes)))
    why = why_slow(results)
    md = []
    if host_bound:
        md += ["## Host-bound cells", ""] + host_bound + [""]
    if why:
        md += (
            [
                "## Why it was slow",
                "",
                "Per cell: the CUDA-graph replay's costs (inputs copied into the graph's buffers "
                "each call, host time per call against the graph's GPU work), where the device "
                "time sits on the roofline (per kernel: `compilekit kernels RUN`), and "
                "max-autotune's winner per tuned op (all choices: `compilekit kernels RUN`).",
                "",
            ]
            + why
            + [""]
        )
    if problems:
        md += ["## Not measured, not correct, or measured only compiled", ""] + problems + [""]
    if attempts:
        md += ["## Other runs of a cell, kept beside the result", ""] + attempts + [""]
    if noisy:
        md += ["## Timings that may be disturbed", ""] + noisy + [""]
    return md


def _plot_lines(images) -> list[str]:
    if images:
        return ["## Plots", ""] + [f"![{name}]({name})" for name in images] + [""]
    if images is None:
        return ["Plots: skipped (install the `plot` extra: pip install 'compilekit[plot]').", ""]
    return ["Plots: none (no correct compiled cell, and no series of 3+ sequence lengths).", ""]
