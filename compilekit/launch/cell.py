"""One cell's steps, in the processes the parent (runner.py) starts for it.

`python -m compilekit.launch.cell PHASE CELL_JSON STAGE_DIR CACHE_DIR TIMEOUT_S`, PHASE one of:
- `cold` (compilekit/launch/coldphase.py): a fresh process, empty caches, nothing of the
  toolkit's switched on: times the first call (what a user waits for) into CACHE_DIR/cold.json,
  then recompiles with the depyf dump, Inductor provenance and TORCH_TRACE on, into
  CACHE_DIR/capture/. Only when the cache is empty.
- `capture`, under max-autotune only: the capture recompile in a fresh process of its own
  (coldphase.separate_capture says why).
- `measure`: a fresh process, caches filled (on a first run it starts beside `cold` and waits,
  after its imports, for it to end: coldphase.wait_for_cold; in a sweep that gives the timed
  calls a core of their own, max-autotune's `capture` runs beside it until the kernel map,
  coldphase.capture_beside): inputs, one eager call, the
  first compiled call (the warm compile), the timed calls (before any profiler, dispatch mode,
  capture hook or float64 reference ever ran in this process), then the reference and the
  error check, and only then the profiler, the eager line recording and the kernel map.
  Writes STAGE_DIR.
A phase that ends the cell early (a refusal, a failure, a wrong output shape) writes
STAGE_DIR/result.json with the reason; the traceback, if any, goes to the log.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import sys
import time
import traceback

from compilekit.evidence import autotuned
from compilekit.evidence import gather as evidence
from compilekit.launch import calls, coldphase, failures, ragged, reaper, warm
from compilekit.measure import steady

PROCESS_START = time.perf_counter()

PROCESS_NOTES = {
    "cold": "a fresh process with empty caches and no toolkit hook: the first call, timed; "
    "then (under max-autotune, in `capture`) a recompile with depyf, provenance and TORCH_TRACE "
    "on (FX/AOT caches off) for the dump and the kernel -> source line mapping, nothing timed",
    "capture": "under max-autotune, the capture recompile in a fresh process of its own "
    "(FX/AOT caches off), which reads the cold compile's choices back; nothing timed",
    "measure": "a fresh process, caches filled: warm first call, timed calls (no profiler, hook "
    "or float64 reference before them), then check, profile and kernel map",
}


def run_measure(cell, stage_dir: str, cache_dir: str, result) -> None:
    """Warm compile, check, time, then profile and map, into `result` and stage_dir."""
    from compilekit.model.spec import Decode

    if isinstance(cell.shape, Decode):  # a generation, not one call
        from compilekit.launch import decodephase

        return decodephase.run_decode(cell, stage_dir, cache_dir, result)
    with result.step("imports"):  # torch, and the variant's module
        import torch

        from compilekit.compile import modes, settings
        from compilekit.evidence import envinfo
        from compilekit.launch import locks

        variant = failures.cell_variant(cell)
    result.torch_version = torch.__version__
    if reason := modes.unsupported_reason(cell.mode, cell.device, cell.alloc):
        raise failures.CellEnded("unsupported", reason)
    with contextlib.ExitStack() as stack:
        if cell.mode != "eager":  # eager calls never read Inductor's config: spare its import
            with result.step("inductor_import_and_settings"):
                changes = stack.enter_context(
                    settings.toolkit_settings(
                        cell.device, False, dict(cell.config), calls.cell_pass(cell)
                    )
                )
            result.settings = {f"torch._inductor.config.{k}": v for k, v in changes.items()}
        # before the cold process is told this one's imports are done: its compile then has
        # no other process's work beside it
        calls.make_device_context(cell.device, result)
        coldphase.wait_for_cold(cache_dir, result, cell)  # a first run: after the cold process
        # The GPU from here on, not before: the imports above are CPU work. Shared with other
        # cells up to the timed calls, no figure is read here, and let go while the warm compile
        # compiles (compilekit/launch/locks.py).
        with locks.gpu_shared_between_compiles(result.steps_s):
            eager_out, args, expected = _first_calls(cell, variant, result)
            compiled = variant.attention
            if cell.mode != "eager":
                compiled = warm.warm_compile(cell, variant, args, cache_dir, result)
            with result.step("first_check"):
                out = compiled(*args)
                calls.checked(out, expected, "compiled:", result)
                del out
        # Timed before the float64 reference and the error check, in the order a user's
        # process (and verify's bare child) runs: inputs, one eager call, compile, time.
        with result.step("time"):
            alone = functools.partial(locks.timed_alone, result.steps_s, cell.device)
            steady.time_cell(cell, variant, compiled, args, result, alone)
        result.triton_autotuned = autotuned.choices() or None  # what the figures ran
        # handed over as its only reference: freed before the compiled call, as the largest
        # cells need that memory
        eager_outs, eager_out = [eager_out], None
        _check_against_reference(cell, variant, compiled, args, eager_outs, result)
        if cell.mode != "eager":  # the kernel map reads the capture: done by now
            coldphase.wait_for_capture(cell, cache_dir, result)
            warm.read_capture(cell, cache_dir, result)
        with locks.gpu_turn(result.steps_s):  # the profile's kernel times are figures
            evidence.gather(cell, compiled, args, stage_dir, cache_dir, result, variant.attention)
        if result.varlen and cell.mode != "eager":  # after every figure: it may compile
            with result.step("second_batch"), locks.gpu_shared_between_compiles(result.steps_s):
                result.varlen["second_batch"] = ragged.second_batch(cell, variant, compiled)
    result.env = envinfo.cell_env(cell.device)  # after the GPU work: it asks for the GPU's name


def _check_against_reference(cell, variant, compiled, args, eager_outs: list, result) -> None:
    """The float64 reference, eager's output (eager_outs: [it or None], taken out here) and a
    fresh compiled call's errors against it, and the verdict (after the timed calls: the
    reference must not run before them)."""
    from compilekit.launch import locks
    from compilekit.measure import inputs
    from compilekit.model.result import EAGER_MULTIPLIER, verdict
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
        del out
        result.error_bound = inputs.error_bound(variant, cell.dtype)
        del ref
    model = isinstance(cell.shape, Tokens)
    result.status = verdict(
        result.max_rel_err, result.eager_max_rel_err, result.error_bound,
        variant.has_reference, model,
    )  # fmt: skip
    if result.status == "wrong":
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


def _first_calls(cell, variant, result):
    """The device's first kernels, the inputs and the eager probe: (eager output or None, the
    inputs, the output's expected shape and dtype: inputs.expected_output)."""
    from compilekit.measure import inputs

    with result.step("device_init"):  # the first kernel: CUDA context, dtype support
        if reason := inputs.dtype_probe(cell.dtype, cell.device):
            raise failures.CellEnded("unsupported", reason)
    with result.step("inputs"):
        args = inputs.cell_inputs(variant, cell)
        result.workload_note = getattr(variant.workload, "note", None)  # a checkpoint's weights
        if getattr(variant.workload, "varlen", None):  # a ragged batch: what was drawn
            result.varlen = {**cell.shape.describe(cell.seed), **variant.workload.varlen}
        eager_out, result.eager_note = calls.eager_first(variant, args, cell)
        expected = inputs.expected_output(variant, args, cell.dtype)
        if eager_out is not None:
            calls.checked(eager_out, expected, "eager:", result)
    return eager_out, args, expected


def main(argv: list[str]) -> int:
    phase, cell_json, stage_dir, cache_dir, timeout_s = argv
    reaper.die_with_parent_and_on_timeout(float(timeout_s), stage_dir)
    from compilekit.compile import modes
    from compilekit.launch import locks
    from compilekit.model.errors import Unsupported, UserError
    from compilekit.model.result import for_cell
    from compilekit.model.spec import Cell

    locks.adopt_inherited()
    cell = Cell.from_dict(json.loads(cell_json))
    result = for_cell(cell, processes={phase: PROCESS_NOTES[phase]})
    spawned_at = os.environ.get("COMPILEKIT_SPAWNED_AT")
    if spawned_at:  # interpreter start and compilekit's imports, before this line ran
        result.steps_s["process_start"] = round(time.time() - float(spawned_at), 3)
    try:
        with modes.grad_context(cell.grad):  # every call of every phase, as a user's loop
            if phase == "cold":
                coldphase.run_cold(cell, cache_dir, result)
            elif phase == "capture":
                coldphase.run_capture(cell, cache_dir, result)
            else:
                run_measure(cell, stage_dir, cache_dir, result)
    except coldphase.ColdEnded:
        return 0  # the cold process ended the cell; the parent says how
    except failures.CellEnded as ended:
        failures.record_end(result, ended)
    except Unsupported as refused:  # outside the eager probe: a model too large for its device
        failures.record_end(result, failures.CellEnded("unsupported", str(refused)))
    except UserError as bad:  # a workload factory's refusal: the user's input, one line
        failures.record_end(result, failures.CellEnded("failed", str(bad)))
        result.failure = "bad_input"
    except Exception as exc:  # the toolkit's own failure, or the user's code in a new place
        traceback.print_exc()
        failures.record_end(result, failures.failure_outside_probe(cell, exc))
    if phase == "measure" or result.reason:  # measured, or the cell ended in this phase
        result.save(stage_dir)
    print(f"{phase} process: {time.perf_counter() - PROCESS_START:.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    reaper.exit_now(main(sys.argv[1:]))
