"""One cell, as every view shows it: the figures derived from a record (a host-bound cell's
speedup from a user's loop, break-even calls, the table's row) and the lines a reader must not
miss. The terminal (cli.py's summary, sweepreport.py's table), REPORT.md (sweepreport.py) and
the pages (pages.py) all read a cell through here, so they never borrow from each other.
Whether compiling paid (speedup, break-even) is worth.py's."""

from __future__ import annotations

import os

from tabulate import tabulate

from compilekit.evidence import autotuned, diagnose
from compilekit.evidence.roofline import NONE_PLACED
from compilekit.evidence.shares import shares_line
from compilekit.report import memoryview, varlenview
from compilekit.report.worth import (
    _num,
    break_even_calls,
    paced,
    paced_speedup,
    pays_text,
    speedup_text,
)


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


def _has_grads(results: list) -> bool:
    return any(r.grad != "off" for r in results)


def _has_allocs(results: list) -> bool:
    return any(r.alloc for r in results)


# what a grad mode wraps the calls in, as a user writes it
GRAD_CONTEXT = {"no-grad": "torch.no_grad()", "inference": "torch.inference_mode()"}


def passes_name(r) -> str:
    """The cell's graph passes as its label names them ('naive-to-sdpa'); '-' for none."""
    from compilekit.model.spec import pass_label

    return "+".join(pass_label(spec) for spec in r.passes) or "-"


def setting_name(r) -> str:
    """What the cell changed in Inductor or around its calls, '' when nothing: 'config cdt',
    'pass naive-to-sdpa', 'grad inference'."""
    parts = [f"config {r.config_name}"] if r.config else []
    parts += [f"pass {passes_name(r)}"] if r.passes else []
    parts += [f"grad {r.grad}"] if r.grad != "off" else []
    parts += [f"alloc {r.alloc}"] if r.alloc else []
    return ", ".join(parts)


def cell_name(r) -> str:
    """A cell as the report's bullets name it: variant, mode and shape, then its config and
    passes where it has any (cells that differ only there must not read alike)."""
    setting = setting_name(r)
    return f"`{variant_name(r)}` / `{r.mode}` / {r.shape}" + (f" ({setting})" if setting else "")


def hosts(results: list) -> list[str]:
    """The machines the cells were measured on (result.json `env.host`)."""
    return sorted({r.env["host"] for r in results if r.env and r.env.get("host")})


def busy_text(r) -> str:
    """'38% host-bound' style: the share of each call the GPU is busy, flagged when host-bound."""
    if r.gpu_busy_share is None:
        return "-"
    return f"{r.gpu_busy_share:.0%}" + (" host-bound" if r.host_bound else "")


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


def headers(results: list) -> list[str]:
    """The table's columns; `config` only when some cell carries Inductor options, `pass` only
    when some cell runs a graph pass, `grad` only when some cell runs inside a grad mode,
    `alloc` only when some cell sets the CUDA allocator's options, `attention` (its share of
    a model's device time) only where some cell has it, `node` only when the cells come from
    more than one machine."""
    out = list(HEADERS)
    if _has_allocs(results):
        out.insert(2, "alloc")
    if _has_grads(results):
        out.insert(2, "grad")
    if _has_passes(results):
        out.insert(2, "pass")
    if _has_configs(results):
        out.insert(2, "config")
    if any(r.time_shares for r in results):  # models: attention's share of the device time
        out.append("attention")
    if len(hosts(results)) > 1:
        out.append("node")
    if varlenview.has_varlen(results):
        out.insert(out.index("TFLOP/s") + 1, varlenview.COLUMN)
    return out


def rows(results: list, peak_tflops: float | None) -> list[list]:
    """One row per cell, in headers(results) order."""
    with_config, with_node = _has_configs(results), len(hosts(results)) > 1
    with_passes, with_varlen = _has_passes(results), varlenview.has_varlen(results)
    with_grad, with_shares = _has_grads(results), any(r.time_shares for r in results)
    with_alloc = _has_allocs(results)
    # where the varlen column goes once the columns before it are in: where headers() puts it
    varlen_at = headers(results).index(varlenview.COLUMN) if with_varlen else None
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
        if with_alloc:
            out[-1].insert(2, r.alloc or "default")
        if with_grad:
            out[-1].insert(2, r.grad)
        if with_passes:
            out[-1].insert(2, passes_name(r))
        if with_config:
            out[-1].insert(2, r.config_name or "base")
        if with_shares:
            out[-1].append(_num((r.time_shares or {}).get("attention"), ".0%"))
        if with_node:
            out[-1].append((r.env or {}).get("host") or "-")
        if with_varlen:
            out[-1].insert(varlen_at, varlenview.waste_text(r))
    return out


def cell_table(results: list) -> str:
    """One row per cell, the same columns as a sweep's report (one table, one set of rules)."""
    return tabulate(rows(results, None), headers=headers(results))


def cell_summary(result) -> str:
    """One cell as a few short lines that fit a terminal (the wide table: `run --wide`); the
    same figures and rules as the table (rows)."""
    row = dict(zip(headers([result]), rows([result], None)[0]))
    lines = [
        f"{result.variant} / {result.mode} / {result.shape} {result.dtype} {result.device}"
        + (f" inside {GRAD_CONTEXT[result.grad]}" if result.grad in GRAD_CONTEXT else "")
        + f": {result.status}"
        + (
            f" (max_rel_err {row['max_rel_err']} vs {result.reference})"
            if result.reference
            else ""
        )
    ]
    if result.decode and result.measured:  # a generation: per-token figures per path
        from compilekit.report import decodeview

        return "\n".join(lines + decodeview.summary_lines(result))
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
            pays = pays_text(result, row["break_even_cold"], row["break_even_warm"])
            lines.append(f"compile     cold {row['cold_s']} s, warm {row['warm_s']} s; {pays}")
        lines.append(
            f"work        {row['TFLOP/s']} TFLOP/s, {row['kernels/fwd']} kernels per forward"
            + (f", GPU busy {row['GPU busy']}" if result.gpu_busy_share is not None else "")
        )
        if line := memoryview.summary_line(result.memory):
            lines.append(line)
    return "\n".join(lines)


def _speedup_words(text: str, result) -> str:
    """' speedup 1.23x' (the table's text), or a host-bound cell's loop speedup by do_bench's."""
    if not result.paced_by_loop:
        return f" speedup {text}x"
    return (
        f" speedup {_num(paced_speedup(result), '.2f')}x in a loop (host-bound; do_bench's "
        f"{_num(result.speedup, '.2f')}x hides host time)"
    )


def host_bound_text(result) -> str:
    """What a host-bound cell costs in a user's loop, beside do_bench's figures."""
    loop = result.compiled_loop_ms if result.paced_by_loop else None
    text = (
        f"host-bound: GPU busy {_num(result.gpu_busy_share, '.0%')} of each call "
        + ("in a loop " if loop else "")
        + f"({_num(result.profiled_forward_device_ms, '.3f')} of "
        f"{_num(loop or result.compiled_ms, '.3f')} ms); the "
        f"host spends {_num(result.host_ms_per_call, '.3f')} ms issuing a call: launches, "
        "guards and wrappers (reduce-overhead / CUDA "
        "graphs target this; see trace.json)"
    )
    if not loop:  # a run from before the loop was timed: do_bench's figure was its latency
        return text
    text += ". "
    if result.mode == "eager" or result.eager_loop_ms is None:  # no eager loop beside it
        return text + (
            f"do_bench reads {_num(result.compiled_ms, '.3f')} ms: its L2 flush hides host time"
        )
    eager, compiled = paced(result)
    return text + (
        f"In a loop, eager {eager['median_ms']:.3f} vs compiled "
        f"{compiled['median_ms']:.3f} ms per call "
        f"({eager['median_ms'] / compiled['median_ms']:.2f}x); do_bench, whose L2 flush "
        f"hides host time, reads {result.eager_ms:.3f} vs {result.compiled_ms:.3f}"
    )


def cell_notes(result) -> list[str]:
    """The lines a reader must not miss: the verdict's reason, host-bound calls, disturbed
    timings, skipped CUDA graphs, the backend that ran, graph breaks and recompiles."""
    notes = [result.workload_note] if result.workload_note else []  # a checkpoint's weights
    notes += [shares_line(result.time_shares)] if result.time_shares else []
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
    if line := varlenview.note(result):
        notes.append(line)
    if result.memory_note:
        notes.append(result.memory_note)
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
        notes.append(diagnose.graph_breaks_text(dynamo["graph_breaks"]))
    if dynamo.get("recompiles"):
        notes.append(
            f"recompiles ({len(dynamo['recompiles'])}): " + "; ".join(dynamo["recompiles"][:3])
        )
    if note := diagnose.recompile_limit_note(dynamo.get("recompile_limit_hit")):
        notes.append(note)
    if result.attempts:
        notes.append(attempts_text(result))
    return notes


def attempts_text(r) -> str:
    """'kept in attempts/ beside this run: 1 failed run(s) (the last: REASON); 2 noisy
    timing(s) (the last: 0.094 ms, NOISE NOTE); 1 run(s) of other code (the last: 0.1 ms,
    measured before ...)'."""
    parts = []
    for status, what in (
        ("failed", "failed run(s)"), ("noisy", "noisy timing(s)"),
        ("other code", "run(s) of other code"),
    ):  # fmt: skip
        kept = [a for a in r.attempts if a["status"] == status]
        if kept:
            last = kept[-1]
            ms = "" if status == "failed" else f"{_num(last.get('compiled_ms'), '.4g')} ms, "
            parts.append(f"{len(kept)} {what} (the last: {ms}{last.get('reason')})")
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
    """Replay costs, the roofline split, max-autotune's and Triton autotuners' choices: what
    the run summary and REPORT.md say of why a cell was slow."""
    lines = [result.replay["note"]] if result.replay else []
    if result.roofline == NONE_PLACED:
        lines.append(result.roofline)
    elif result.roofline:
        lines.append(f"{result.roofline} (share of device time; `compilekit kernels` per kernel)")
    tuned = [autotune_line(op) for op in result.autotune or []]
    return lines + tuned + autotuned.lines(result.triton_autotuned)


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
