"""`compilekit report DIR`: a sweep's results as a terminal table, REPORT.md and plots."""

from __future__ import annotations

import json
import math
import os
from collections import defaultdict

from tabulate import tabulate

from compilekit.spec import UserError, parse_shape


def load_results(out_dir: str) -> list[dict]:
    """Every cell's result.json under out_dir (one directory per cell)."""
    if not os.path.isdir(out_dir):
        raise UserError(f"{out_dir!r} is not a directory: give the OUT of a sweep")
    results = []
    for name in sorted(os.listdir(out_dir)):
        path = os.path.join(out_dir, name, "result.json")
        if ".tmp-" in name or ".old-" in name or not os.path.isfile(path):
            continue
        with open(path) as f:
            results.append(json.load(f) | {"run_dir": os.path.join(out_dir, name)})
    if not results:
        raise UserError(f"{out_dir!r} holds no cell results: run `make sweep` into it first")
    return results


def saves_time(r: dict) -> bool:
    """Compiled beats eager by more than the timing spread: its p90 under eager's p10."""
    eager, compiled = r.get("eager_timing") or {}, r.get("compiled_timing") or {}
    if "p90_ms" in compiled and "p10_ms" in eager:
        return compiled["p90_ms"] < eager["p10_ms"]
    return bool(r.get("compiled_ms") and r.get("eager_ms") and r["compiled_ms"] < r["eager_ms"])


def break_even_calls(compile_s: float | None, r: dict):
    """Calls after which compiling has paid for itself; None when it never pays (compiled is
    not faster than eager by more than the spread of the two timings)."""
    if not compile_s or not saves_time(r):
        return None
    return math.ceil(compile_s / ((r["eager_ms"] - r["compiled_ms"]) / 1e3))


def cell_status(r: dict) -> str:
    """unsupported, failed, WRONG (measured but over the error bound) or ok."""
    if r.get("unsupported"):
        return "unsupported"
    if r.get("error"):
        return "failed"
    return "ok" if r.get("ok") else "WRONG"


def _num(value, fmt):
    return "-" if value is None else format(value, fmt)


def rows(results: list[dict], peak_tflops: float | None) -> list[list]:
    out = []
    for r in results:
        measured = r.get("compiled_ms") is not None
        eager = r.get("mode") == "eager"
        cold = break_even_calls(r.get("compile_cold_s"), r)
        warm = break_even_calls(r.get("compile_warm_s"), r)
        out.append(
            [
                r["variant"],
                r["mode"],
                r["shape"],
                r["dtype"],
                r["device"],
                cell_status(r),
                _num(r.get("max_rel_err"), ".1e"),
                _num(r.get("eager_ms"), ".3f"),
                _num(r.get("compiled_ms"), ".3f"),
                _num(r.get("speedup"), ".2f"),
                "-" if eager or not measured else _num(r.get("compile_cold_s"), ".1f"),
                "-" if eager or not measured else _num(r.get("compile_warm_s"), ".1f"),
                "-" if eager or not measured else (f"{cold:,}" if cold else "never"),
                "-" if eager or not measured else (f"{warm:,}" if warm else "never"),
                _num(r.get("tflops"), ".1f"),
                _num(
                    r["tflops"] / peak_tflops * 100 if r.get("tflops") and peak_tflops else None,
                    ".1f",
                ),
                _num(r.get("kernels_per_forward"), "g"),
            ]
        )
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
]


def plot(results: list[dict], out_dir: str) -> list[str]:
    """speedup.png (per mode, per variant) and seqlen.png (log-log latency vs S with fitted
    exponent); [] when matplotlib is missing. Returns the files written."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    written = []
    ok = [r for r in results if cell_status(r) == "ok"]
    by_shape = defaultdict(list)
    for r in ok:
        by_shape[r["shape"]].append(r)
    shape, cells = max(by_shape.items(), key=lambda kv: len(kv[1]), default=(None, []))
    compiled = [r for r in cells if r["mode"] != "eager"]
    if compiled:
        modes = sorted({r["mode"] for r in compiled})
        variants = sorted({r["variant"] for r in compiled})
        fig, ax = plt.subplots(figsize=(max(6, len(variants) * 1.3), 4))
        width = 0.8 / len(modes)
        for i, mode in enumerate(modes):
            xs = [j + i * width for j, v in enumerate(variants)]
            ys = [
                next(
                    (r["speedup"] for r in compiled if r["variant"] == v and r["mode"] == mode),
                    float("nan"),
                )
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


def scaling_series(results: list[dict]) -> dict[str, tuple[list, list, float]]:
    """{"variant/mode D=64 bfloat16": (S values, ms, fitted exponent)} for series with 3+ points.

    The exponent is the least-squares slope of log(ms) against log(S).
    """
    groups = defaultdict(dict)
    for r in results:
        shape = parse_shape(r["shape"])
        key = (
            f"{r['variant']}/{r['mode']} B={shape.batch} H={shape.heads} "
            f"D={shape.head_dim} {r['dtype']}"
        )
        groups[key][shape.seq] = r["compiled_ms"]
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


def report(out_dir: str) -> str:
    """Write REPORT.md (and plots) into out_dir; return the terminal table."""
    results = load_results(out_dir)
    env = {}
    if os.path.isfile(os.path.join(out_dir, "env.json")):
        with open(os.path.join(out_dir, "env.json")) as f:
            env = json.load(f)
    ceilings = env.get("ceilings", {})
    peak = ceilings.get("matmul_tflops")
    table = rows(results, peak)
    images = plot(results, out_dir)
    problems = [
        f"- `{r['variant']}` / `{r['mode']}` / {r['shape']} {r['dtype']}: "
        f"{cell_status(r)}: {(r.get('unsupported') or r.get('error') or '').splitlines()[0][:300]}"
        for r in results
        if cell_status(r) in ("unsupported", "failed")
    ]
    wrong = [
        f"- `{r['variant']}` / `{r['mode']}` / {r['shape']}: max_rel_err {r['max_rel_err']:.3g} "
        f"over the bound {r.get('error_bound')}"
        for r in results
        if cell_status(r) == "WRONG"
    ]
    scaling = scaling_series([r for r in results if cell_status(r) == "ok"])
    md = [f"# compilekit report: {os.path.basename(os.path.abspath(out_dir))}", ""]
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
        "more than the timing spread (compiled p90 under eager p10). TFLOP/s "
        "counts 4·B·H·S²·D/2 (causal).",
        "",
        tabulate(table, headers=HEADERS, tablefmt="github"),
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
    if wrong or problems:
        md += ["## Not measured or not correct", ""] + wrong + problems + [""]
    if images:
        md += ["## Plots", ""] + [f"![{name}]({name})" for name in images] + [""]
    else:
        md += ["Plots: skipped (install the `plot` extra: pip install 'compilekit[plot]').", ""]
    with open(os.path.join(out_dir, "REPORT.md.tmp"), "w") as f:
        f.write("\n".join(md))
    os.replace(os.path.join(out_dir, "REPORT.md.tmp"), os.path.join(out_dir, "REPORT.md"))
    notes = f"\nwrote {os.path.join(out_dir, 'REPORT.md')}" + (
        f" and {', '.join(images)}" if images else " (plots skipped: matplotlib not installed)"
    )
    return tabulate(table, headers=HEADERS) + notes
