"""`compilekit report DIR`: a sweep's results as a terminal table, REPORT.md and plots."""

from __future__ import annotations

import math
import os
import sys
from collections import defaultdict

from tabulate import tabulate

from compilekit import baselines, cpuwatch, samespeed
from compilekit import result as results_mod
from compilekit.errors import UserError
from compilekit.spec import parse_shape
from compilekit.store import CorruptFile, read_json, write_text


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
            or not os.path.isfile(os.path.join(run_dir, "result.json"))
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


def paced(r) -> tuple[dict, dict]:
    """(eager, compiled) timings that say whether compiling was worth it: a user's loop for a
    host-bound cell, whose do_bench figures hide host time (its L2 flush lets the host run
    ahead), over the loops both ran at the same CPU speed where they carry it
    (samespeed.paired_timings); do_bench's otherwise."""
    if r.paced_by_loop:
        eager, compiled = r.loop_timing["eager"], r.loop_timing["compiled"]
        return samespeed.paired_timings(eager, compiled) or (eager, compiled)
    # the medians from the record's own fields (a hand-made record may carry no summaries)
    return (
        {**(r.eager_timing or {}), "median_ms": r.eager_ms},
        {**(r.compiled_timing or {}), "median_ms": r.compiled_ms},
    )


def saves_time(r) -> bool:
    """Compiled beats eager by more than the timing spread: its p90 under eager's p10."""
    if r.eager_ms is None:  # eager could not run (eager_note): nothing to beat
        return False
    eager, compiled = paced(r)
    if "p90_ms" in compiled and "p10_ms" in eager:
        return compiled["p90_ms"] < eager["p10_ms"]
    return bool(compiled["median_ms"] and eager["median_ms"]) and (
        compiled["median_ms"] < eager["median_ms"]
    )


def break_even_calls(compile_s: float | None, r):
    """Calls after which compiling has paid for itself; None when it never pays (compiled is
    not faster than eager by more than the spread of the two timings)."""
    if not compile_s or not saves_time(r):
        return None
    eager, compiled = paced(r)
    return math.ceil(compile_s / ((eager["median_ms"] - compiled["median_ms"]) / 1e3))


def paced_speedup(r) -> float | None:
    """eager over compiled, from the timings `paced` picks."""
    if r.speedup is None:
        return None
    eager, compiled = paced(r)
    return eager["median_ms"] / compiled["median_ms"]


def speedup_text(r) -> str:
    """eager over compiled; a host-bound cell's from a user's loop, marked `loop`."""
    if r.paced_by_loop and r.speedup is not None:
        return f"{paced_speedup(r):.2f} loop"
    return _num(r.speedup, ".2f")


def busy_text(r) -> str:
    """'38% host-bound' style: the share of each call the GPU is busy, flagged when host-bound."""
    if r.gpu_busy_share is None:
        return "-"
    return f"{r.gpu_busy_share:.0%}" + (" host-bound" if r.host_bound else "")


def _num(value, fmt):
    return "-" if value is None else format(value, fmt)


def variant_name(r) -> str:
    """A user variant as file.py:fn (the label keeps the path hash); built-ins as they are."""
    if ":" in r.variant and r.variant.split(":", 1)[0].endswith(".py"):
        path, fn = r.variant.rsplit(":", 1)
        return f"{os.path.basename(path)}:{fn}"
    return r.variant


def _has_configs(results: list) -> bool:
    return any(r.config for r in results)


def _has_passes(results: list) -> bool:
    return any(r.passes for r in results)


def passes_name(r) -> str:
    """The cell's graph passes as its label names them ('naive-to-sdpa'); '-' for none."""
    from compilekit.passes import label_of

    return "+".join(label_of(spec) for spec in r.passes) or "-"


def setting_name(r) -> str:
    """What the cell changed in Inductor, '' when nothing: 'config cdt', 'pass naive-to-sdpa'."""
    parts = [f"config {r.config_name}"] if r.config else []
    parts += [f"pass {passes_name(r)}"] if r.passes else []
    return ", ".join(parts)


def cell_name(r) -> str:
    """A cell as the report's bullets name it: variant, mode and shape, then its config and
    passes where it has any (cells that differ only there must not read alike)."""
    setting = setting_name(r)
    return f"`{variant_name(r)}` / `{r.mode}` / {r.shape}" + (f" ({setting})" if setting else "")


def hosts(results: list) -> list[str]:
    """The machines the cells were measured on (result.json `env.host`)."""
    return sorted({r.env["host"] for r in results if r.env and r.env.get("host")})


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


def headers(results: list) -> list[str]:
    """The table's columns; `config` only when some cell carries Inductor options, `pass` only
    when some cell runs a graph pass, `node` only when the cells come from more than one
    machine."""
    out = list(HEADERS)
    if _has_passes(results):
        out.insert(2, "pass")
    if _has_configs(results):
        out.insert(2, "config")
    if len(hosts(results)) > 1:
        out.append("node")
    return out


def rows(results: list, peak_tflops: float | None) -> list[list]:
    """One row per cell, in headers(results) order."""
    with_config, with_node = _has_configs(results), len(hosts(results)) > 1
    with_passes = _has_passes(results)
    out = []
    for r in results:
        # no eager figure (eager could not run): no break-even either
        compiled = r.measured and r.mode != "eager" and r.eager_ms is not None
        cold = break_even_calls(r.compile_cold_s, r)
        warm = break_even_calls(r.compile_warm_s, r)
        out.append(
            [
                variant_name(r),
                r.mode,
                r.shape,
                r.dtype,
                r.device,
                r.status,
                _num(r.max_rel_err, ".1e"),
                _num(r.eager_ms, ".3f"),
                _num(r.compiled_ms, ".3f") + (" noisy" if r.noisy else ""),
                speedup_text(r),
                _num(r.compile_cold_s, ".1f"),
                _num(r.compile_warm_s, ".1f"),
                (f"{cold:,}" if cold else "never") if compiled else "-",
                (f"{warm:,}" if warm else "never") if compiled else "-",
                _num(r.tflops, ".3g"),
                _num(r.tflops / peak_tflops * 100 if r.tflops and peak_tflops else None, ".1f"),
                _num(r.kernels_per_forward, "g"),
                busy_text(r),
            ]
        )
        if with_passes:
            out[-1].insert(2, passes_name(r))
        if with_config:
            out[-1].insert(2, r.config_name or "base")
        if with_node:
            out[-1].append((r.env or {}).get("host") or "-")
    return out


HEADERS = [
    "variant",
    "mode",
    "shape",
    "dtype",
    "device",
    "check",
    "max_rel_err",
    "eager_ms",
    "compiled_ms",
    "speedup",
    "cold_s",
    "warm_s",
    "break_even_cold",
    "break_even_warm",
    "TFLOP/s",
    "%peak",
    "kernels/fwd",
    "GPU busy",
]


def plot(results: list[dict], out_dir: str) -> list[str]:
    """speedup.png (per mode, per variant) and seqlen.png (log-log latency vs S with fitted
    exponent). Returns the files written; None when matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    written = []
    ok = [r for r in results if r.ok]
    by_shape = defaultdict(list)
    for r in ok:
        by_shape[r.shape].append(r)
    shape, cells = max(by_shape.items(), key=lambda kv: len(kv[1]), default=(None, []))
    compiled = [r for r in cells if r.mode != "eager"]
    if compiled:
        modes = sorted({r.mode for r in compiled})
        # cells that differ only in config or pass get a bar each
        bar = lambda r: " ".join(filter(None, [variant_name(r), setting_name(r)]))  # noqa: E731
        variants = sorted({bar(r) for r in compiled})
        fig, ax = plt.subplots(figsize=(max(6, len(variants) * 1.3), 4))
        width = 0.8 / len(modes)
        for i, mode in enumerate(modes):
            xs = [j + i * width for j, v in enumerate(variants)]
            ys = [
                next(
                    (r.speedup for r in compiled if bar(r) == v and r.mode == mode),
                    None,
                )
                or float("nan")  # no such cell, or one without an eager figure
                for v in variants
            ]
            ax.bar(xs, ys, width, label=mode)
        ax.axhline(1.0, color="k", lw=0.8)
        ax.set_yscale("log")  # flex compiled is ~50x, a GEMM-bound variant ~1x: both must read
        ax.set_xticks([j + 0.4 - width / 2 for j in range(len(variants))], variants, rotation=30)
        ax.set_ylabel("speedup vs eager (x)")
        ax.set_title(f"compile speedup at {shape}")
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(os.path.join(out_dir, "speedup.png"), dpi=120)
        plt.close(fig)
        written.append("speedup.png")
    series = scaling_series(ok)
    if series:
        fig, ax = plt.subplots(figsize=(7, 5))
        for label, (xs, ys, slope) in sorted(series.items()):
            ax.loglog(xs, ys, marker="o", label=f"{label} (slope {slope:.2f})")
        ax.set_xlabel("sequence length S")
        ax.set_ylabel("median latency (ms)")
        ax.set_title("latency vs sequence length (fitted exponent in legend)")
        ax.legend(fontsize=6)
        fig.tight_layout()
        fig.savefig(os.path.join(out_dir, "seqlen.png"), dpi=120)
        plt.close(fig)
        written.append("seqlen.png")
    return written


def series_key(r) -> str:
    """The series a cell belongs to when S varies: everything but S ('naive/default B=4 H=16
    D=64 bfloat16', then its config and pass)."""
    shape = parse_shape(r.shape)
    return (
        f"{variant_name(r)}/{r.mode} B={shape.batch} H={shape.heads} D={shape.head_dim} {r.dtype}"
    ) + (f" {setting_name(r)}" if setting_name(r) else "")


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
                f"| {key} | {seq} | {r.compiled_ms:.4g} | {_num(r.eager_ms, '.4g')} | "
                f"{speedup_text(r)} | {pays if r.eager_ms is not None else '-'} |"
            )
    return out


def scaling_series(results: list) -> dict[str, tuple[list, list, float]]:
    """{"variant/mode D=64 bfloat16": (S values, ms, fitted exponent)} for series with 3+ points.

    The exponent is the least-squares slope of log(ms) against log(S).
    """
    groups = defaultdict(dict)
    for r in results:
        groups[series_key(r)][parse_shape(r.shape).seq] = r.compiled_ms
    series = {}
    for key, points in groups.items():
        if len(points) < 3:
            continue
        xs = sorted(points)
        ys = [points[x] for x in xs]
        lx, ly = [math.log(x) for x in xs], [math.log(y) for y in ys]
        mx, my = sum(lx) / len(lx), sum(ly) / len(ly)
        slope = sum((a - mx) * (b - my) for a, b in zip(lx, ly)) / sum((a - mx) ** 2 for a in lx)
        series[key] = (xs, ys, slope)
    return series


def why_slow(results: list) -> list[str]:
    """Markdown bullets: each measured cell's replay, roofline and autotune lines."""
    from compilekit.report import why_slow_lines

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
    ceilings = env.get("ceilings", {})
    peak = ceilings.get("matmul_tflops")
    table = rows(results, peak)
    images = plot(results, out_dir)
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
    from compilekit.report import (  # report imports this module
        attempts_text,
        host_bound_text,
        retimed_text,
    )

    attempts = [f"- {cell_name(r)}: {attempts_text(r)}" for r in results if r.attempts]

    host_bound = [f"- {cell_name(r)}: {host_bound_text(r)}" for r in results if r.host_bound]

    noisy = [
        f"- {cell_name(r)}: " + "; ".join(filter(None, [r.noise_note, retimed_text(r)]))
        for r in results
        if r.noisy or r.timing_attempts
    ]
    why = why_slow(results)
    scaling = scaling_series([r for r in results if r.ok])
    md = [f"# compilekit report: {os.path.basename(os.path.abspath(out_dir))}", ""]
    mix = machine_mix(results)
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
        md += [
            "## Machine",
            "",
            f"{env.get('gpu') or env.get('cpu')} ({env.get('device')}), torch {env.get('torch')}, "
            f"triton {env.get('triton')}, depyf {env.get('depyf')}, CUDA {env.get('cuda')}, "
            f"cuDNN {env.get('cudnn')}, driver {env.get('driver')}, Python {env.get('python')}.",
            f"Measured ceilings: {ceilings.get('matmul_dtype')} matmul "
            f"{_num(peak, '.0f')} TFLOP/s (n={ceilings.get('matmul_n')}), device copy "
            f"{_num(ceilings.get('copy_gbps'), '.0f')} GB/s; `%peak` is TFLOP/s over that "
            "matmul ceiling.",
            "",
        ]
    md += [
        "## Cells",
        "",
        "Latency is the steady-state median (`compiled_ms`, the mode's; `eager_ms`, the same "
        "process's "
        "eager baseline). Break-even: calls after which the compile (cold: empty cache; warm: "
        "filled cache) has paid for itself; `never` when compiled is not faster than eager by "
        "more than the timing spread (compiled p90 under eager p10). TFLOP/s counts the "
        "FLOPs each variant declares (4·B·H·D per kept query-key pair: S(S+1)/2 causal, "
        "S·W - W(W-1)/2 for a window of W); `-` where a variant declares none. `GPU busy`: "
        "device time per forward over the latency; under 80% the call is host-bound, and its "
        "speedup (marked `loop`) and break-even come from a user's loop of eager and of "
        "compiled calls, over the loops both ran at the same CPU speed where each loop "
        "carries the speed a probe read before it. "
        "`noisy`: the timing spread, the machine's load or other processes' CPU use while it "
        "was timed (a core or a quarter of the machine's, whichever is more, or as much "
        "stolen by the hypervisor), or the CPU's own speed changing over "
        f"{cpuwatch.SPEED_CHANGE:g}x meanwhile (a Python loop timed before and after; on a "
        "GPU only where twice the host's cost per call would reach the kernel's time), says it "
        "was disturbed; a cell whose timing was "
        "taken again after such a disturbance is named below.",
        "",
        tabulate(table, headers=headers(results), tablefmt="github"),
        "",
    ]
    if scaling:
        md += [
            "## Scaling with sequence length",
            "",
            "| series | S range | fitted exponent |",
            "|---|---|---|",
        ]
        md += [
            f"| {k} | {xs[0]}-{xs[-1]} | {slope:.2f} |"
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
    md += baselines.section(results, baselines.load(out_dir))
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
    if images:
        md += ["## Plots", ""] + [f"![{name}]({name})" for name in images] + [""]
    elif images is None:
        md += ["Plots: skipped (install the `plot` extra: pip install 'compilekit[plot]').", ""]
    else:
        md += ["Plots: none (no correct compiled cell, and no series of 3+ sequence lengths).", ""]
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
