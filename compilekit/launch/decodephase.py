"""A decode cell's measure steps (compilekit/measure/decode), which launch/cell.run_measure runs
after its imports and settings: the steps of measure/cell.py, for a generation instead of one
call.

In order, as for every cell: imports; the eager generation (its greedy tokens are the
reference); the warm compiles (the step, whose cold compile the cold process timed, and
transformers' generate; the prompt's forward stays eager in both paths, as generate() runs
it); the timed generations of both paths, eager and
compiled (before any profiler, float reference or hook); the profile and kernel map of one
compiled step; then the checks: tokens against eager's, and teacher-forced logits against the
same model in float32 (float64 for a float32 cell) with its own attention where a compilekit
one is plugged in, the weights converted in place last (moved to the host where the GPU has no
room for them: compilekit/measure/fits.py).
"""

from __future__ import annotations

import os

from compilekit.evidence import diagnose
from compilekit.evidence import gather as evidence
from compilekit.measure import cell as measure_cell
from compilekit.measure import failures
from compilekit.measure.decode import figures
from compilekit.measure.decode.generate import run_generate
from compilekit.measure.decode.loop import run_loop

RUNS = 3  # timed generations per path and kind of the cell's own mode, after an untimed one
# The untimed generation's tokens: enough for a CUDA graph's warm-up, recording and replays,
# and for generate()'s first-call work; a 7B model's 200 eager tokens would cost 6 s more
WARM_TOKENS = 4
# eager beside a compiled cell: eager's own cell times it RUNS times; here it is the baseline
# of one row, and at 7B a 200-token eager generation holds the GPU alone for 5-6 s
RUNS_BESIDE = 1
CHECKED_STEPS = 8  # the first tokens whose logits are checked against the float reference
PATHS = ("loop", "generate")


def measure_decode(cell, variant, result, stage_dir: str, cache_dir: str) -> None:
    """Generate, time both paths, profile one step, check; into `result` and stage_dir (in
    the measure process, after launch/cell.run_measure's imports and settings)."""
    from compilekit.evidence import envinfo
    from compilekit.measure import locks

    with locks.gpu_shared_between_compiles(result.steps_s):
        session, args, fns, eager = _prepare(cell, variant, cache_dir, result)
        weights = figures.weight_bytes(session.model, cell.shape.batch)
        kv = figures.kv_bytes_per_position(session.cache)
    with result.step("time"), locks.timed_alone(result.steps_s, cell.device):
        runs = {key: _timed(key, session, fns, _runs(cell, key[1])) for key in _keys(cell)}
    own = runs[("loop", _own(cell))]
    if "error" in own:  # the cell's own figure: without it there is nothing to report
        raise failures.CellEnded(*failures.failure_in_mode(cell, own["error"]))
    with locks.gpu_turn(result.steps_s):  # the profile's kernel times are figures
        evidence.gather(cell, fns["step"], args, stage_dir, cache_dir, result)
    with result.step("reference_and_check"), locks.gpu_shared(result.steps_s):
        checks = _check(cell, variant, session, fns, eager, runs, result)
    ceilings = envinfo.device_ceilings(cell.device, os.path.dirname(cache_dir))
    _record(cell, result, runs, checks, weights, kv, ceilings.get("copy_gbps"), fns, stage_dir)


def _own(cell) -> str:
    """The kind the cell's own figures are: its mode's callables."""
    return "eager" if cell.mode == "eager" else "compiled"


def _runs(cell, kind: str) -> int:
    """Timed generations of a kind: RUNS for the cell's own, RUNS_BESIDE for eager beside."""
    return RUNS if kind == _own(cell) else RUNS_BESIDE


def _kinds(cell) -> tuple[str, ...]:
    """eager, and the cell's own kind where that is another."""
    return tuple(dict.fromkeys(("eager", _own(cell))))


def _keys(cell) -> list[tuple[str, str]]:
    return [(path, kind) for path in PATHS for kind in _kinds(cell)]


def _prepare(cell, variant, cache_dir: str, result):
    """The session, the step's arguments, the callables of each kind and the eager
    generation (the reference tokens)."""
    from compilekit.measure import inputs

    with result.step("device_init"):
        if reason := inputs.dtype_probe(cell.dtype, cell.device):
            raise failures.CellEnded("unsupported", reason)
    with result.step("inputs"):  # the model, its prompt, the cache filled by an eager prefill
        args = inputs.cell_inputs(variant, cell)
        session = variant.session
        result.workload_note = getattr(variant.workload, "note", None)
    with result.step("eager_generation"):
        eager = _probe(cell, lambda: run_loop(session, session.prefill, session.step))
    fns = {"eager": (session.prefill, session.step, None), "compile_s": {}}
    fns["step"] = session.step
    if cell.mode == "eager":
        return session, args, fns, eager
    fns["step"] = measure_cell.warm_compile(cell, variant, args, cache_dir, result)
    measure_cell.read_capture(cell, cache_dir, result)  # the cold process ended with its capture
    from compilekit.compile import knobs, modes

    options = knobs.compile_options(modes.MODES[cell.mode][0], dict(cell.config))
    # The prompt's forward stays eager, as generate() runs it: compiling it would cost a
    # second whole-model compile for a figure (the first token) that eager already gives.
    fns["compiled"] = (session.prefill, fns["step"], options)
    with result.step("compile_generate"):  # transformers compiles on the first call
        from torch._dynamo.utils import counters

        graphs = counters["stats"]["unique_graphs"]
        try:
            first = run_generate(session, options)
            fns["compile_s"]["generate_first_call"] = first.wall_s
            # transformers falls back to its uncompiled forward without a word where it
            # judges a compile impossible: the graphs Dynamo made say whether it compiled
            fns["generate_graphs"] = counters["stats"]["unique_graphs"] - graphs
        except Exception as exc:  # the loop's figures stand without it
            fns["generate_error"] = (
                f"transformers' compiled generate() failed: {failures.first_line(exc)}"
            )
    return session, args, fns, eager


def _probe(cell, generate):
    """The eager generation, or CellEnded with torch's words (a refusal, out of memory)."""
    try:
        return generate()
    except failures.CellEnded:
        raise
    except Exception as exc:
        raise failures.classify(exc, cell.shape) from None


def _timed(key, session, fns, runs: int) -> dict:
    """`runs` generations of one path and kind after a short untimed one (WARM_TOKENS):
    their Run records, or the error that stopped them."""
    path, kind = key
    if kind == "compiled" and path == "generate" and "generate_error" in fns:
        return {"error": fns["generate_error"]}
    prefill, step, options = fns[kind]
    lengths = [min(WARM_TOKENS, session.shape.new)] + [None] * runs
    try:
        done = []
        for new in lengths:
            if path == "loop":
                done.append(run_loop(session, prefill, step, new=new))
            else:
                done.append(run_generate(session, options, new=new))
        return {"runs": done[1:]}
    except Exception as exc:
        return {"error": f"{path} {kind} failed: {failures.first_line(exc)}"}


def _check(cell, variant, session, fns, eager, runs, result) -> dict:
    """Each path's tokens against eager's; the logits of the first tokens, teacher-forced on
    eager's tokens, against the float reference; the verdict."""
    import torch

    from compilekit.measure import fits, inputs
    from compilekit.model.result import EAGER_MULTIPLIER, eager_adrift, verdict_beside_eager

    reference_tokens = eager.tokens
    first = range(min(CHECKED_STEPS, cell.shape.new))
    kind = _own(cell)
    forced = {
        k: run_loop(session, *fns[k][:2], forced=reference_tokens, keep=first)
        for k in _kinds(cell)
    }
    agreement = {}
    for key, timed in runs.items():
        if "runs" in timed:
            agreement["/".join(key)] = _agreement(
                timed["runs"][0].tokens, reference_tokens, session, fns, key
            )
    ref_dtype = getattr(torch, fits.reference_dtype(cell.dtype, decode=True))
    place, where = fits.reference_device(
        cell.device, fits.float_copy_bytes(session.model, ref_dtype)
    )
    # a plugged-in attention is checked against the model's own, as a forward's is
    own_attention = getattr(variant.workload, "reference_config", None) or {}
    session.retyped(
        ref_dtype,
        positions=cell.shape.prompt + len(first),
        device=None if place == cell.device else place,  # the host, or where the model is
        config=own_attention,
    )
    truth = run_loop(session, session.prefill, session.step, forced=reference_tokens, keep=first)

    def worst(run):
        return max(
            inputs.max_rel_err(mine, ref.to(mine.device, torch.float64))
            for mine, ref in zip(run.logits, truth.logits)
        )

    # what the reference's config holds, as it ran
    ran = {key: getattr(session.model.config, key, None) for key in own_attention}
    with_what = f" with {ran}" if ran else ""
    result.reference = (
        f"logits of the first {len(first)} tokens, teacher-forced on eager's tokens, against "
        f"the same model in {str(ref_dtype).removeprefix('torch.')}{with_what}{where}"
    )
    result.eager_max_rel_err = worst(forced["eager"])
    result.max_rel_err = worst(forced[kind])
    result.error_bound = inputs.error_bound(variant, cell.dtype)
    result.output_dtype = cell.dtype
    result.status = verdict_beside_eager(
        result.max_rel_err, result.eager_max_rel_err, result.error_bound
    )
    if result.status == "wrong":
        result.reason = eager_adrift(result.eager_max_rel_err, result.error_bound, cell.dtype) or (
            f"compiled logits off by {result.max_rel_err:.3g} (relative), over the "
            f"{cell.dtype} bound {result.error_bound} and over {EAGER_MULTIPLIER:g}x "
            f"eager's own {result.eager_max_rel_err:.3g}"
        )
    return agreement


def _agreement(tokens, reference, session, fns, key) -> dict:
    """How many tokens match eager's before the first difference; at a difference, how far
    apart eager's logits put the two tokens, and (the loop) how far this kind's own
    teacher-forced logits were from eager's there: a near tie that rounding tips, or not."""
    same = (tokens == reference).all(dim=0)
    differ = (~same).nonzero()
    out = {"same_tokens": int(same.sum()), "of": int(same.numel()), "first_difference": None}
    if not len(differ):
        return out
    at = int(differ[0])
    out["first_difference"] = at
    eager_logits = run_loop(session, *fns["eager"][:2], forced=reference, keep=[at]).logits[0]
    row = int((tokens[:, at] != reference[:, at]).nonzero()[0])
    mine, theirs = int(reference[row, at]), int(tokens[row, at])
    out["eager_margin"] = float(eager_logits[row, mine] - eager_logits[row, theirs])
    if key[0] == "loop":  # generate() gives no logits of its own to compare
        own = run_loop(session, *fns[key[1]][:2], forced=reference, keep=[at]).logits[0]
        out["logits_max_abs_diff"] = float((own - eager_logits).abs().max())
    return out


def _record(cell, result, runs, checks, weights, kv, copy_gbps, fns, stage_dir) -> None:
    """result.decode (per path and kind: times, rates, tokens against eager's), and the
    cell's usual fields read as per-token figures of the loop."""
    per_token = figures.bytes_per_token(weights, kv, cell.shape.prompt, cell.shape.new)
    device_ms = diagnose.busy_ms(result)  # one step of the cell's own kind
    own = _own(cell)
    paths = {}
    for (path, kind), timed in runs.items():
        entry = paths.setdefault(path, {})
        if "error" in timed:
            entry[kind] = {"error": timed["error"]}
            continue
        done = timed["runs"]
        stats = figures.summary([ms for run in done for ms in run.token_ms])
        stats["ttft_ms"] = figures.median([run.ttft_ms for run in done])
        stats["wall_s"] = figures.median([run.wall_s for run in done])
        host = [ms for run in done for ms in run.host_ms]
        stats["host_ms_per_token"] = figures.median(host) if host else None
        stats.update(figures.rate(per_token, stats["median_ms"], copy_gbps))
        stats["gpu_busy"] = (
            device_ms / stats["median_ms"]
            if kind == own and device_ms and cell.device == "cuda"
            else None
        )
        stats["tokens"] = checks.get(f"{path}/{kind}")
        entry[kind] = stats
    loop = paths.get("loop", {})
    eager_ms = (loop.get("eager") or {}).get("median_ms")
    mine = loop.get(own) or {}
    result.eager_ms, result.compiled_ms = eager_ms, mine.get("median_ms")
    if eager_ms and result.compiled_ms:
        result.speedup = eager_ms / result.compiled_ms
    result.host_ms_per_call = mine.get("host_ms_per_token")
    result.gpu_busy_share = mine.get("gpu_busy")
    break_even = None
    if own == "compiled" and eager_ms and result.compiled_ms:
        break_even = figures.break_even_tokens(result.compile_cold_s, eager_ms, result.compiled_ms)
    result.decode = {
        "batch": cell.shape.batch,
        "prompt": cell.shape.prompt,
        "new": cell.shape.new,
        "cache_len": cell.shape.cache_len,
        "runs": {kind: _runs(cell, kind) for kind in _kinds(cell)},
        "weight_bytes": weights,
        "kv_bytes_per_position": kv,
        "bytes_per_token": per_token,
        "copy_gbps": copy_gbps,
        "compile_s": fns["compile_s"],
        "generate_graphs": fns.get("generate_graphs"),
        "break_even_tokens": break_even,
        "gap": _step_gap(stage_dir, result.compiled_ms, weights, per_token, copy_gbps),
        "paths": paths,
    }


def _step_gap(stage_dir: str, token_ms, weights: float, per_token: float, copy_gbps):
    """figures.gap for the cell's own loop, from the profiled step's kernels, each row's time
    per call times its calls per step (None without a ceiling or a kernel map)."""
    path = os.path.join(stage_dir, "kernels.json")
    if not (copy_gbps and token_ms and os.path.isfile(path)):
        return None
    from compilekit.model.store import read_json

    found = read_json(path)
    kernels = [(k, k["device_ms"] * k["calls_per_forward"]) for k in found["kernels"]]
    overlap = found.get("forward_overlap_ms") or 0.0  # absent from kernel maps made before it
    return figures.gap(token_ms, kernels, weights, per_token - weights, copy_gbps, overlap)
