"""The allocator's figures of a cell or a profiled block (evidence/allocator.py) as text: the
summary's line, the table under `compilekit ops --by memory`, REPORT.md's rows."""

from __future__ import annotations

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
        "reserve is the graph's working memory, listed apart).",
        "",
        "| " + " | ".join(["cell", "side", *HEADERS[1:]]) + " |",
        "|" + "---|" * (len(HEADERS) + 1),
    ]
    for r in measured:
        conf = f" [{r.memory['allocator_conf']}]" if r.memory.get("allocator_conf") else ""
        md += [f"| {name(r)}{conf} | {' | '.join(map(str, row))} |" for row in rows(r.memory)]
    return md + [""]
