"""The allocator's figures of a cell or a profiled block (evidence/allocator.py) as text: the
summary's line, the table under `compilekit ops --by memory`, REPORT.md's rows."""

from __future__ import annotations

import os

from tabulate import tabulate

SIDES = ("eager", "compiled", "block")  # a cell's two, or a profiled block
HEADERS = ["", "peak allocated MiB", "peak reserved MiB", "fragmented", "inactive split MiB",
           "segments", "cudaMalloc retries", "CUDA-graph pools MiB"]  # fmt: skip


def summary_line(memory: dict | None) -> str | None:
    """One line: each side's peak allocated/reserved and fragmentation, a CUDA-graph pool's
    reserve, the allocator's settings; the CPU's note where nothing was measured."""
    if not memory:
        return None
    if "note" in memory:
        return memory["note"]
    parts = []
    for side in SIDES:
        f = memory.get(side)
        if f and "error" in f:
            parts.append(f"{side} not measured ({f['error'][:120]})")
        elif f:
            text = (
                f"{side} {f['peak_allocated_mb']:.1f}/{f['peak_reserved_mb']:.1f} MiB, "
                f"{f['fragmentation']:.0%} fragmented"
            )
            if pools := f.get("cudagraph_pools"):
                text += f", {pools['reserved_mb']:.1f} MiB in CUDA-graph pools"
            if f["alloc_retries"]:
                text += f", {f['alloc_retries']} cudaMalloc retries"
            parts.append(text)
    conf = f" [{memory['allocator_conf']}]" if memory.get("allocator_conf") else ""
    return "memory      peak allocated/reserved: " + "; ".join(parts) + conf


def rows(memory: dict) -> list[list]:
    """One row per measured side, HEADERS' columns."""
    out = []
    for side in SIDES:
        f = memory.get(side)
        if not f or "error" in f:
            continue
        pools = f.get("cudagraph_pools")
        out.append([
            side, f"{f['peak_allocated_mb']:.1f}", f"{f['peak_reserved_mb']:.1f}",
            f"{f['fragmentation']:.1%}", f"{f['inactive_split_mb']:.1f}", f["segments"],
            f["alloc_retries"], f"{pools['reserved_mb']:.1f}" if pools else "-",
        ])  # fmt: skip
    return out


def table(memory: dict | None) -> str:
    """The allocator's figures as a text table, with what they are; the note on the CPU."""
    if not memory:
        return "allocator: not measured (a run from before compilekit measured it)"
    if "note" in memory:
        return memory["note"]
    text = tabulate(rows(memory), headers=HEADERS)
    unmeasured = [f"{s}: {memory[s]['error']}" for s in SIDES if "error" in memory.get(s, {})]
    held = memory.get("held_reserved_mb")
    return "\n".join([
        f"The CUDA caching allocator, {memory.get('what', 'one forward per side')} "
        "(fragmented: the share of reserved memory no tensor used, CUDA-graph pools aside)",
        "",
        text,
        *unmeasured,
        *([f"held after the timed calls: {held:.1f} MiB reserved"] if held is not None else []),
        *([f"allocator settings: {memory['allocator_conf']}"] if memory.get("allocator_conf")
          else []),
    ])  # fmt: skip


def under_ops(memory: dict | None, by: str) -> str:
    """What the op table ranked `by` gets under it: by memory, the allocator's table where
    CUDA measured it (the CPU's lack of a peak the op table says itself); else nothing."""
    if by != "memory" or "note" in (memory or {}):
        return ""
    return "\n\n" + table(memory)


def section(results: list, name) -> list[str]:
    """REPORT.md's memory table: every measured CUDA cell's sides (name(result): the cell's
    name); the CPU's note where only CPU cells have a figure; empty for none."""
    measured = [r for r in results if r.measured and r.memory and "note" not in r.memory]
    if not measured:
        note = next((r.memory["note"] for r in results if (r.memory or {}).get("note")), "")
        return ["## Memory", "", f"{note}.", ""] if note else []
    md = [
        "## Memory: the CUDA caching allocator in one forward",
        "",
        "Each side's forward from an emptied cache, after the timed calls; fragmented: the "
        "share of reserved memory no tensor used at the peak, CUDA-graph pools aside (their "
        "reserve is the graph's working memory, listed apart); ms: that side's median call, "
        "beside what it held.",
        "",
        "| " + " | ".join(["cell", "side", *HEADERS[1:], "ms"]) + " |",
        "|" + "---|" * (len(HEADERS) + 2),
    ]
    for r in measured:
        # a cell's own --alloc is in its name already; an inherited setting is not
        inherited = r.memory.get("allocator_conf") if not r.alloc else None
        conf = f" [{inherited}]" if inherited else ""
        for row in rows(r.memory):
            ms = r.eager_ms if row[0] == "eager" else r.compiled_ms
            row += [f"{ms:.4g}" if ms is not None else "-"]
            md.append(f"| {name(r)}{conf} | {' | '.join(map(str, row))} |")
    return md + [""]


def memory_view(run_dir: str) -> str:
    """`compilekit memory RUN`: the allocator's figures and one forward's timeline; one line
    naming the fix for a CPU run or a run without a timeline."""
    from compilekit.evidence import timeline
    from compilekit.model import result as results_mod

    result = results_mod.read_run(run_dir)
    found = timeline.load(run_dir, result)
    return table(result.memory) + "\n\n" + timeline_text(found, run_dir)


def _line(row: dict) -> str:
    if not row.get("file"):
        return "-"
    return f"{os.path.basename(row['file'])}:{row['line']}  {row.get('code', '')[:60]}"


def timeline_text(t: dict, run_dir: str) -> str:
    """The timeline's peaks and the largest tensors live at the peak, each and by line."""
    largest = [[f"{r['mb']:.1f}", r["op"] or "-", _line(r)] for r in t["largest_at_peak"]]
    lines = [
        [f"{r['mb']:.1f}", r["tensors"], r["op"] or "-", _line(r)] for r in t["by_line_at_peak"]
    ]
    return "\n".join([
        f"One forward's memory ({t['what']}): {t['events']} allocator events; "
        f"{t['before_allocated_mb']:.1f} MiB allocated before it (weights, inputs, what calls "
        f"keep), peak {t['peak_allocated_mb']:.1f} MiB allocated, "
        f"{t['peak_reserved_mb']:.1f} MiB reserved",
        "",
        f"Largest tensors the forward made, live at its peak "
        f"({t['live_at_peak_mb']:.1f} MiB in all):",
        tabulate(largest, headers=["MiB", "op", "source line"]) if largest else "(none)",
        "",
        "By source line:",
        tabulate(lines, headers=["MiB", "tensors", "op", "source line"]) if lines else "(none)",
        "",
        _snapshot_line(os.path.join(run_dir, t["snapshot"])),
    ])  # fmt: skip


def _snapshot_line(path: str) -> str:
    if os.path.isfile(path):
        return f"snapshot: {path} (open it in https://pytorch.org/memory_viz)"
    return f"snapshot: not here ({path}): publish leaves it in the run directory it came from"


def timeline_svg(points: list, width: int = 720, height: int = 180) -> str:
    """Allocated and reserved MiB over the forward's allocator events, as inline SVG."""
    top = max([max(p[1], p[2]) for p in points] + [1e-9])
    last = max(points[-1][0], 1)

    def xy(i, v):
        return f"{40 + (width - 50) * i / last:.1f},{height - 20 - (height - 30) * v / top:.1f}"

    curves = []
    for col, color, name in ((2, "#bbb", "reserved"), (1, "#1f77b4", "allocated")):
        pts = " ".join(xy(p[0], p[col]) for p in points)
        curves.append(f'<polyline fill="none" stroke="{color}" stroke-width="1.5" points="{pts}">'
                      f"<title>{name}</title></polyline>")  # fmt: skip
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'role="img" aria-label="memory over one forward">'
        f'<text x="2" y="12" font-size="11">{top:.0f} MiB</text>'
        f'<text x="2" y="{height - 22}" font-size="11">0</text>'
        f'<text x="40" y="{height - 4}" font-size="11">allocator events of one forward '
        f"(blue: allocated, grey: reserved)</text>" + "".join(curves) + "</svg>"
    )


def page_timeline(run_dir: str) -> dict | None:
    """A CUDA run's memory_timeline.json with its curve drawn, for the run page; None where
    it has none."""
    from compilekit.evidence.timeline import TIMELINE
    from compilekit.model.store import kept, read_json

    path = kept(os.path.join(run_dir, TIMELINE))  # a published cell's is gzipped
    if not os.path.isfile(path):
        return None
    found = read_json(path)
    return {**found, "svg": timeline_svg(found["points"])}


def batch_series(results: list) -> dict[str, list[tuple[int, float, float]]]:
    """{"bert-base/default 128 [alloc]": [(batch, peak allocated MiB, peak reserved MiB)]}
    (the key: variant, mode, the shape but its batch, the allocator's settings) of the
    measured side of each CUDA cell, for series of two batches or more, batch ascending."""
    from compilekit.evidence.allocator import measured_side
    from compilekit.model.spec import parse_shape

    groups: dict = {}
    for r in results:
        side = measured_side(r.memory)
        if not r.measured or "peak_allocated_mb" not in side or "peak_reserved_mb" not in side:
            continue
        shape = parse_shape(r.shape)
        rest = str(shape).split("x", 1)[1]  # all but the batch
        key = f"{r.variant}/{r.mode} {rest}" + (f" [{r.alloc}]" if r.alloc else "")
        groups.setdefault(key, []).append(
            (shape.batch, side["peak_allocated_mb"], side["peak_reserved_mb"])
        )
    return {k: sorted(v) for k, v in groups.items() if len({b for b, _, _ in v}) >= 2}
