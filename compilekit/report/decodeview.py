"""A decode cell in the terminal and in reports: the generation's size and its limit, then one
row per path and kind (tokens/s, ms per token, first token, GB/s against the copy ceiling, GPU
busy, host time, tokens against eager's), then the compiles."""

from __future__ import annotations

from tabulate import tabulate

from compilekit.report import worth

HEADERS = [
    "path",
    "kind",
    "tokens/s",
    "ms/token (median, p90)",
    "first token ms",
    "GB/s",
    "of copy",
    "GPU busy",
    "host ms/token",
    "tokens as eager's",
]


def _num(value, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def tokens_text(tokens: dict | None) -> str:
    """'200/200', or where the first token differs and how close eager's logits were there."""
    if not tokens:
        return "-"
    text = f"{tokens['same_tokens']}/{tokens['of']}"
    at = tokens.get("first_difference")
    if at is None:
        return text
    text += f", first differs at token {at} (eager's margin {tokens['eager_margin']:.3g}"
    if tokens.get("logits_max_abs_diff") is not None:
        text += f"; logits {tokens['logits_max_abs_diff']:.3g} apart"
    return text + ")"


def rows(decode: dict) -> list[list[str]]:
    """One row per path and kind."""
    out = []
    for path, kinds in decode["paths"].items():
        for kind, s in kinds.items():
            if "error" in s:  # its words go under the table (failure_lines): a column is narrow
                out.append([path, kind, "failed"] + ["-"] * (len(HEADERS) - 3))
                continue
            out.append(
                [
                    path,
                    kind,
                    _num(s["tokens_per_s"], ",.1f"),
                    f"{s['median_ms']:.3f}, {s['p90_ms']:.3f}",
                    _num(s["ttft_ms"], ".2f"),
                    _num(s["gbps"], ",.0f"),
                    _num(s["share_of_copy"], ".0%"),
                    _num(s["gpu_busy"], ".0%"),
                    _num(s["host_ms_per_token"], ".3f"),
                    tokens_text(s.get("tokens")),
                ]
            )
    return out


def failure_lines(decode: dict) -> list[str]:
    """One line per path and kind that failed, with its reason."""
    return [
        f"error       {s['error'][:300]}"
        for kinds in decode["paths"].values()
        for s in kinds.values()
        if "error" in s
    ]


def gigabytes(n: float) -> str:
    return f"{n / 1e9:.2f} GB" if n >= 1e8 else f"{n / 1e6:.3g} MB"


def size_line(decode: dict) -> str:
    """What one token must read, and the tokens/s that the copy ceiling allows."""
    kv = decode["bytes_per_token"] - decode["weight_bytes"]
    line = (
        f"decode      {decode['batch']} x {decode['prompt']}-token prompt + {decode['new']} new "
        f"tokens, KV cache of {decode['cache_len']} positions; "
        f"{gigabytes(decode['bytes_per_token'])} read per token (weights "
        f"{gigabytes(decode['weight_bytes'])} + KV {gigabytes(kv)})"
    )
    if decode.get("copy_gbps"):
        limit = decode["copy_gbps"] * 1e9 / decode["bytes_per_token"]
        line += (
            f"; at the copy ceiling ({decode['copy_gbps']:,.0f} GB/s) at most "
            f"{limit:,.0f} tokens/s"
        )
    return line


def compile_line(result) -> str | None:
    """The compiles a decode cell waits for, and the tokens after which they pay off."""
    decode = result.decode
    if result.mode == "eager":
        return None
    extra = decode.get("compile_s") or {}
    parts = [f"compile     step cold {_num(result.compile_cold_s, '.1f')} s, warm "
             f"{_num(result.compile_warm_s, '.1f')} s"]  # fmt: skip
    if "generate_first_call" in extra:
        graphs = decode.get("generate_graphs")
        parts.append(
            f"generate()'s first call {extra['generate_first_call']:.1f} s"
            + (" (it compiled nothing: transformers ran it uncompiled)" if graphs == 0 else "")
        )
    tokens = decode.get("break_even_tokens")
    pays = (
        f"the step's cold compile pays off after {tokens:,.0f} tokens"
        if tokens is not None
        else "never pays off: the compiled loop is not faster"
    )
    return "; ".join(parts) + f"; {pays}"


def gap_line(gap: dict | None) -> str | None:
    """Where the loop's time per token goes beyond the limit, largest first."""
    if not gap:
        return None
    parts = {
        "device idle (host loop, syncs)": gap["idle_gpu_ms"],
        "matmuls beyond the copy speed"
        + (
            f" (they read the weights at {gap['matmuls_share_of_copy']:.0%} of it)"
            if gap["matmuls_share_of_copy"]
            else ""
        ): gap["matmuls_beyond_copy_ms"],
        "attention (its mask included) beyond its cache bytes": gap["attention_beyond_copy_ms"],
        "other kernels (norms, rotary, activations, cache writes)": gap["other_kernels_ms"],
        "sampling": gap["sampling_ms"],
        "CUDA-graph input copies": gap["graph_copies_ms"],
        # counted in two kernels' times where one waited on the other (gaps before it: none)
        "kernels at once (counted twice above)": gap.get("overlapped_ms", 0.0),
    }
    # a part no kernel made (no CUDA graph, no copies) is left out, not printed as 0.000
    shown = ", ".join(
        f"{what} {ms:.3f}" for what, ms in sorted(parts.items(), key=lambda kv: -kv[1]) if ms
    )
    return (
        f"gap         {gap['token_ms']:.3f} ms per token against a limit of "
        f"{gap['limit_ms']:.3f} ms: {shown} (ms per token)"
    )


def summary_lines(result) -> list[str]:
    """The lines after a decode cell's verdict."""
    decode = result.decode
    lines = [size_line(decode)]
    lines += tabulate(rows(decode), headers=HEADERS, disable_numparse=True).splitlines()
    lines += failure_lines(decode)
    for line in (gap_line(decode.get("gap")), compile_line(result)):
        if line:
            lines.append(line)
    return lines


SECTION_INTRO = (
    "Each decode cell's paths, eager and compiled: tokens/s per sequence, ms per token, GB/s "
    "read (weights and KV cache) and its share of the device's copy ceiling, GPU busy, and "
    "the greedy tokens against eager's. Under the table, per cell: what a token must read "
    "and the tokens/s the ceiling allows, where the compiled loop's time goes beyond that "
    "limit, and the compiles."
)


def _loop_eager_ms(result) -> float | None:
    return ((result.decode["paths"].get("loop") or {}).get("eager") or {}).get("median_ms")


def beside_note(result, results: list) -> str | None:
    """Where a compiled cell's eager loop, timed beside it as the baseline of its speedup, is
    more than worth.BASELINE_APART from the eager cell of its workload (a host-bound eager loop
    follows the host: in a sweep, other cells compile beside it): both figures."""
    if result.mode == "eager" or not (beside := _loop_eager_ms(result)):
        return None
    own = worth.eager_cell(result, results)
    own_ms = _loop_eager_ms(own) if own is not None and own.decode else None
    if not own_ms or not worth.apart(beside, own_ms):
        return None
    return (
        f"eager's loop timed beside this cell read {beside:.3f} ms per token, the eager cell of "
        f"this shape {own_ms:.3f} ({beside / own_ms:.2f}x): this cell's speedup reads against the "
        "first; the eager cell's row is the steadier baseline"
    )


def cells(results: list) -> list[tuple]:
    """(result, its rows, its notes) for each measured decode cell: the table's rows, and the
    size, gap, compile and failure lines without their terminal labels, and beside_note."""
    out = []
    for r in results:
        if not (r.decode and r.measured):
            continue
        lines = [size_line(r.decode), gap_line(r.decode.get("gap")), compile_line(r)]
        lines += failure_lines(r.decode)
        # the terminal's labels ("decode      ") read as clauses of one note here
        notes = [" ".join(line.split(None, 1)[1:]) for line in lines if line]
        notes += filter(None, [beside_note(r, results)])
        out.append((r, rows(r.decode), notes))
    return out


def section(results: list, name) -> list[str]:
    """REPORT.md's lines for the measured decode cells (name(result): the cell's name); empty
    when there are none."""
    found = cells(results)
    if not found:
        return []
    head = ["cell"] + HEADERS
    md = ["## Decode: tokens per second against the copy ceiling", "", SECTION_INTRO, ""]
    md += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r, table, _ in found:
        md += [f"| {name(r)} | " + " | ".join(row) + " |" for row in table]
    md.append("")
    md += [f"- {name(r)}: " + "; ".join(notes) for r, _, notes in found]
    return md + [""]
