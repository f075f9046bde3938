"""The sweep's plots (speedup.png, seqlen.png), and the series over sequence length that the
latency plot and REPORT.md's scaling table fit."""

from __future__ import annotations

import math
import os
from collections import defaultdict

from compilekit.model.spec import parse_shape
from compilekit.report.cellview import setting_name, variant_name
from compilekit.report.memoryview import batch_series


def plot(results: list[dict], out_dir: str, dpi: int = 100) -> list[str]:
    """speedup.png (per mode, per variant), seqlen.png (log-log latency vs S with fitted
    exponent) and memory.png (each series' peak memory against batch), at a screen's dpi:
    plots are most of a published sweep's bytes. Returns the files written; None when
    matplotlib is missing."""
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
        fig.savefig(os.path.join(out_dir, "speedup.png"), dpi=dpi)
        plt.close(fig)
        written.append("speedup.png")
    series = scaling_series(ok)
    if series:
        fig, ax = plt.subplots(figsize=(7, 5))
        for label, (xs, ys, slope) in sorted(series.items()):
            ax.loglog(xs, ys, marker="o", label=f"{label} (slope {slope:.2f})")
        labels = ("sequence length S", "median latency (ms)",
                  "latency vs sequence length (fitted exponent in legend)")  # fmt: skip
        written.append(_save(plt, fig, ax, labels, os.path.join(out_dir, "seqlen.png"), dpi))
    by_batch = batch_series(ok)
    if by_batch:
        fig, ax = plt.subplots(figsize=(7, 5))
        for label, points in sorted(by_batch.items()):
            xs = [b for b, _, _ in points]
            line = ax.plot(xs, [a for _, a, _ in points], marker="o", label=label)[0]
            ax.plot(xs, [r for _, _, r in points], ls="--", color=line.get_color())
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        labels = ("batch", "MiB in one forward (solid: peak allocated, dashed: peak reserved)",
                  "memory against batch size")  # fmt: skip
        written.append(_save(plt, fig, ax, labels, os.path.join(out_dir, "memory.png"), dpi))
    return written


def _save(plt, fig, ax, labels: tuple, path: str, dpi: int) -> str:
    """A line plot's axis labels, title and legend; the file written; its name."""
    xlabel, ylabel, title = labels
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    return os.path.basename(path)


def series_key(r) -> str:
    """The series a cell belongs to when S varies: everything but S ('naive/default B=4 H=16
    D=64 bfloat16', then its config and pass)."""
    shape = parse_shape(r.shape)
    return (
        f"{variant_name(r)}/{r.mode} B={shape.batch} H={shape.heads} D={shape.head_dim} {r.dtype}"
    ) + (f" {setting_name(r)}" if setting_name(r) else "")


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
