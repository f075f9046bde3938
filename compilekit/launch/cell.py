"""One cell's steps, in the processes the parent (runner.py) starts for it.

`python -m compilekit.launch.cell PHASE CELL_JSON STAGE_DIR CACHE_DIR TIMEOUT_S`, PHASE one of:
- `cold` (compilekit/launch/coldphase.py): a fresh process, empty caches, nothing of the
  toolkit's switched on: times the first call (what a user waits for) into CACHE_DIR/cold.json,
  then recompiles with the depyf dump, Inductor provenance and TORCH_TRACE on, into
  CACHE_DIR/capture/. Only when the cache is empty.
- `capture`, under max-autotune only: the capture recompile in a fresh process of its own
  (coldphase.separate_capture says why).
- `measure`: a fresh process, caches filled: compilekit/measure/cell.py's measure_cell, which
  reads top to bottom as what a cell measures. Writes STAGE_DIR. On a first run it starts
  beside `cold` (their imports overlap) and waits for it after its own: coldphase.wait_for_cold.
A phase that ends the cell early (a refusal, a failure, a wrong output shape) writes
STAGE_DIR/result.json with the reason; the traceback, if any, goes to the log.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
import traceback

from compilekit.launch import coldphase, reaper
from compilekit.measure import calls, failures

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
    """The measure process: its imports and Inductor settings, then (after a first run's cold
    process: coldphase.wait_for_cold) measure_cell, the steps in compilekit/measure/cell.py,
    or for a generation decodephase.measure_decode, the same steps around a decode."""
    from compilekit.model.spec import Decode

    decode = isinstance(cell.shape, Decode)
    with result.step("imports"):  # torch, and the variant's module
        import torch

        from compilekit.compile import modes, settings
        from compilekit.evidence import envinfo
        from compilekit.measure.cell import measure_cell

        if decode:
            from compilekit.launch import decodephase
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
        # a first run: after the cold process (a decode reads its capture with the cold one's)
        coldphase.wait_for_cold(cache_dir, result, None if decode else cell)
        if decode:
            decodephase.measure_decode(cell, variant, result, stage_dir, cache_dir)
        else:
            measure_cell(
                cell, variant, result, stage_dir, cache_dir,
                capture_ready=lambda: coldphase.wait_for_capture(cell, cache_dir, result),
            )  # fmt: skip
    result.env = envinfo.cell_env(cell.device)  # after the GPU work: it asks for the GPU's name


def main(argv: list[str]) -> int:
    phase, cell_json, stage_dir, cache_dir, timeout_s = argv
    reaper.die_with_parent_and_on_timeout(float(timeout_s), stage_dir)
    from compilekit.compile import modes
    from compilekit.model.errors import Unsupported, UserError
    from compilekit.model.result import for_cell
    from compilekit.model.spec import Cell

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
