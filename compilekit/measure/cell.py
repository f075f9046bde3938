"""How a cell is measured, top to bottom: `measure_cell`.

It runs in the cell's measure process (compilekit/launch/cell.py starts that process, imports
torch, applies the cell's Inductor settings and calls it). On a compiled cell's first run, the
cold process (launch/coldphase.py) has already timed the cold compile in a process of its own
and filled the caches; here the first compiled call is the warm compile.

In a sweep, cells take turns on the GPU (measure/locks.py): steps that read no figure share it,
the timed calls and the profile hold it alone. In a single run every turn is free.
"""

from __future__ import annotations

import os

from compilekit.evidence import allocator, autotuned, diagnose
from compilekit.evidence import gather as evidence
from compilekit.measure import calls, failures, inputs, locks, ragged, steady

RETUNED = "retuned.json"  # in the capture folder: what the capture compile tuned again, if any


def measure_cell(cell, variant, result, stage_dir: str, cache_dir: str, capture_ready=None):
    """Measure one cell into `result` and stage_dir: inputs, one eager call, the first compiled
    call, the timed calls, the check against float64, then the profile and the kernel map.
    `capture_ready()`, if given, waits for the capture recompile the kernel map reads."""
    with locks.gpu_shared_between_compiles(result.steps_s):  # no figure is read before 4.
        # 1. The device's first kernel: a dtype it cannot run ends the cell here, in one line.
        with result.step("device_init"):
            if reason := inputs.dtype_probe(cell.dtype, cell.device):
                raise failures.CellEnded("unsupported", reason)
        # 2. Seeded inputs and one eager call, as a user's script makes them.
        with result.step("inputs"):
            args = inputs.cell_inputs(variant, cell)
            result.workload_note = getattr(variant.workload, "note", None)
            if getattr(variant.workload, "varlen", None):  # a ragged batch: what was drawn
                result.varlen = {**cell.shape.describe(cell.seed), **variant.workload.varlen}
            eager_out, result.eager_note = calls.eager_first(variant, args, cell)
            expected = inputs.expected_output(variant, args, cell.dtype)
            if eager_out is not None:
                calls.checked(eager_out, expected, "eager:", result)
        # 3. The first compiled call of a fresh wrapper: the warm compile.
        compiled = variant.attention
        if cell.mode != "eager":
            compiled = warm_compile(cell, variant, args, cache_dir, result)
        with result.step("first_check"):
            out = compiled(*args)
            calls.checked(out, expected, "compiled:", result)
            del out
    # 4. The timed calls, before any float64 reference, profiler or hook ran in this process.
    # In a sweep they hold the GPU alone, and a core of their own where there is one to spare.
    with result.step("time"):
        alone = locks.timed_alone(result.steps_s, cell.device)
        steady.time_cell(cell, variant, compiled, args, result, alone)
    # what the process holds in steady state, before the check's float64 reference is made
    held = allocator.held_mb(cell.device)
    result.triton_autotuned = autotuned.choices() or None  # the configs the figures ran
    # 5. The float64 reference and the errors; eager's output is handed over as its only
    # reference, freed before the compiled call (the largest cells need that memory).
    eager_outs, eager_out = [eager_out], None
    check_against_reference(cell, variant, compiled, args, eager_outs, result)
    # 6. The allocator's figures, the profile and the kernel map (evidence/gather.py).
    if cell.mode != "eager":
        if capture_ready is not None:
            capture_ready()
        read_capture(cell, cache_dir, result)
    with locks.gpu_turn(result.steps_s):  # the profile's kernel times are figures
        evidence.gather(
            cell, compiled, args, stage_dir, cache_dir, result, variant.attention, held
        )
    # 7. A ragged batch: does another batch compile again? Last: it may compile.
    if result.varlen and cell.mode != "eager":
        with result.step("second_batch"), locks.gpu_shared_between_compiles(result.steps_s):
            result.varlen["second_batch"] = ragged.second_batch(cell, variant, compiled)


def warm_compile(cell, variant, args, cache_dir: str, result):
    """The first call of a fresh torch.compile wrapper with the caches filled, beside the cold
    compile's record (cache_dir/cold.json) and the CUDA-graph skip reasons torch logs."""
    from torch._dynamo.utils import counters

    from compilekit.compile import modes
    from compilekit.model.store import read_json

    cold = read_json(os.path.join(cache_dir, "cold.json"))
    with result.step("compile_warm"), diagnose.cudagraph_skip_reasons() as skip_reasons:
        compiled, warm_s, _ = calls.compiled_first_call(cell, variant, args, result.steps_s)
    if cell.device == "cpu":
        # Inductor's compile workers keep cores busy after the compile; on a 2-core machine
        # they would be timed along with the kernels.
        from torch._inductor import async_compile

        if hasattr(async_compile, "shutdown_compile_workers"):
            with result.step("compile_workers_stop"):
                async_compile.shutdown_compile_workers()
    result.autotune = cold.get("autotune") or None
    result.compile_cold_s = cold["compile_cold_s"]
    result.compile_cold_measured_at = cold["measured_at"]
    result.compile_warm_s = warm_s
    add_steps(result, "cold", cold.get("steps_s"))
    result.compile_notes = {
        "cold": cold["includes"] + f" (measured {cold['measured_at']}, kept with the cache)",
        "warm": "the first call in a fresh process with the caches filled (this run)",
    }
    result.cudagraphs = diagnose.cudagraph_status(
        modes.uses_cudagraphs(cell.mode),
        cell.device,
        counters["inductor"].get("cudagraph_skips", 0),
        skip_reasons,
    )
    return compiled


def check_against_reference(cell, variant, compiled, args, eager_outs: list, result) -> None:
    """The float64 reference, eager's output (eager_outs: [it or None], taken out here) and a
    fresh compiled call's errors against it, and the verdict."""
    from compilekit.model.result import EAGER_MULTIPLIER, eager_adrift, verdict
    from compilekit.model.spec import Tokens

    with result.step("reference_and_check"), locks.gpu_shared(result.steps_s):
        ref, result.reference = inputs.reference_output(variant, *args)
        eager_out = eager_outs.pop()
        if eager_out is not None:
            eager_out = inputs.checkable(variant, eager_out)
            result.eager_max_rel_err = inputs.max_rel_err(eager_out, ref)
        del eager_out
        # a fresh call, not the first check's output: a CUDA graph's output is overwritten
        # by the timed replays (torch then refuses to read the old one)
        out = inputs.checkable(variant, compiled(*args))
        result.max_rel_err = inputs.max_rel_err(out, ref)
        del out, ref
        result.error_bound = inputs.error_bound(variant, cell.dtype)
    model = isinstance(cell.shape, Tokens)
    result.status = verdict(
        result.max_rel_err, result.eager_max_rel_err, result.error_bound,
        variant.has_reference, model,
    )  # fmt: skip
    adrift = model and eager_adrift(result.eager_max_rel_err, result.error_bound, cell.dtype)
    if result.status == "wrong" and adrift:
        result.reason = adrift
    elif result.status == "wrong":
        worst = max(result.max_rel_err, result.eager_max_rel_err or 0.0)
        result.reason = f"max_rel_err {worst:.3g} over the {cell.dtype} bound {result.error_bound}"
        if model and result.eager_max_rel_err is not None:
            result.reason += f" and over {EAGER_MULTIPLIER:g}x eager's own"
    elif model and (result.eager_max_rel_err or 0.0) > result.error_bound:
        result.reference += (
            f"; eager in {cell.dtype} is itself {result.eager_max_rel_err:.3g} from it, over "
            f"the bound {result.error_bound}: compiled is judged beside eager (at most "
            f"{EAGER_MULTIPLIER:g}x its error, plus a tenth of the bound: torch's own rule)"
        )


def read_capture(cell, cache_dir: str, result) -> None:
    """What the capture recompile left beside the cache: its graph pass counts, its steps, and
    a note where it tuned again (then the kernel map may name other choices than the timed
    compile's: it tuned while the GPU was not its alone)."""
    from compilekit.model.store import read_json

    capture = os.path.join(cache_dir, "capture")
    if cell.passes:
        result.pass_stats = read_json(os.path.join(capture, "passes.json"))
    if os.path.isfile(os.path.join(capture, "steps.json")):
        add_steps(result, "capture", read_json(os.path.join(capture, "steps.json")))
    if os.path.isfile(os.path.join(capture, RETUNED)):
        ops = read_json(os.path.join(capture, RETUNED))
        result.compile_notes["capture"] = (
            f"the capture compile tuned {len(ops)} op(s) again instead of reading the cold "
            "compile's choices, while the GPU was not its alone: the kernel map may name other "
            "choices than the timed compile's"
        )


def add_steps(result, phase: str, steps) -> None:
    """The steps another process of the cell recorded, as `phase.step` in result.steps_s (what
    is not a number of seconds is left out)."""
    if isinstance(steps, dict):
        for name, seconds in steps.items():
            if isinstance(seconds, (int, float)) and not isinstance(seconds, bool):
                result.steps_s[f"{phase}.{name}"] = seconds
