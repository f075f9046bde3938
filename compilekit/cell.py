"""One cell's steps, in the processes the parent (runner.py) starts for it.

`python -m compilekit.cell PHASE CELL_JSON STAGE_DIR CACHE_DIR TIMEOUT_S`, PHASE one of:
- `cold`: a fresh process, empty caches, nothing of the toolkit's switched on: times the first
  call (what a user waits for) into CACHE_DIR/cold.json. Only when the cache is empty.
- `capture`: recompiles (FX and AOT caches off, kernel caches kept) with the depyf dump,
  Inductor provenance and TORCH_TRACE on, into CACHE_DIR/capture/. Only after `cold`.
- `measure`: a fresh process, caches filled: inputs, one eager call, the first compiled call
  (the warm compile), the timed calls (before any profiler, dispatch mode, capture hook or
  float64 reference ever ran in this process), then the reference and the error check, and
  only then the profiler, the eager line recording and the kernel map. Writes STAGE_DIR.
A phase that ends the cell early (a refusal, a failure, a wrong output shape) writes
STAGE_DIR/result.json with the reason; the traceback, if any, goes to the log.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import sys
import time
import traceback

from compilekit import evidence, failures, reaper, steady

PROCESS_START = time.perf_counter()

PROCESS_NOTES = {
    "cold": "a fresh process with empty caches and no toolkit hook: the first call only",
    "capture": "a separate recompile with depyf, provenance and TORCH_TRACE on (FX/AOT caches "
    "off): the dump and the kernel -> source line mapping; nothing timed",
    "measure": "a fresh process, caches filled: warm first call, timed calls (no profiler, hook "
    "or float64 reference before them), then check, profile and kernel map",
}


def _eager_probe(variant, args, cell):
    """Run the variant once eagerly: its output, or failures.CellEnded with torch's words (and the
    warnings that explain a refusal)."""
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            return variant.attention(*args)
        except Exception as exc:
            traceback.print_exc()
            ended = failures.classify(exc, cell.shape)
            why = [
                str(w.message).splitlines()[0]
                for w in caught
                if any(
                    k in str(w.message) for k in ("kernel not used", "not supported", "requires")
                )
            ]
            if ended.status == "unsupported" and why:
                ended.reason = "; ".join([ended.reason] + why[:4])
            verb = "cannot run on" if ended.status == "unsupported" else "failed on"
            where = f"{cell.device} {cell.dtype} at {cell.shape}"
            ended.reason = f"{cell.variant!r} {verb} {where}: {ended.reason}"
            raise ended from None


def _eager_first(variant, args, cell):
    """The eager probe of a cell: (its output, None), or (None, why) where a compiled mode's
    eager call ran out of memory. The compiled call may fit where eager's does not (flex's
    eager path holds every score: 64 GiB at 4x16x16384): that cell goes on, compiled alone."""
    try:
        return _eager_probe(variant, args, cell), None
    except failures.CellEnded as ended:
        if cell.mode == "eager" or not ended.out_of_memory:
            raise
        reason = ended.reason
        # torch's error (ended.__context__) keeps the failed call's frames, and with them every
        # tensor it made, in a cycle through the probe's frame: on the H200 flex's 129 GiB
        # stayed held and the float64 reference then ran out of memory
        ended.__context__ = None
    import gc

    gc.collect()
    if cell.device == "cuda":  # give the freed blocks back for the reference and compile
        import torch

        torch.cuda.empty_cache()
    return None, f"eager could not run ({reason}): only the compiled call was checked and timed"


def _checked(out, q, what: str, result) -> None:
    """CellEnded unless `out` can be the answer for q; the output's dtype goes on the record."""
    from compilekit import inputs

    if hasattr(out, "dtype"):
        result.output_dtype = str(out.dtype).removeprefix("torch.")
    problem = inputs.output_problem(out, q)
    if problem:
        status = "wrong" if problem.startswith(("output shape", "output dtype")) else "failed"
        raise failures.CellEnded(status, f"{what} {problem}")


def _compiled_first_call(cell, variant, args):
    """A fresh torch.compile wrapper and the seconds of its first call (the compile)."""
    from compilekit import modes, timing

    compiled = modes.build(cell.mode, variant.attention, dict(cell.config))
    try:
        seconds, out = timing.first_call_s(compiled, args, cell.device)
    except Exception as exc:
        traceback.print_exc()
        # Dynamo wraps the backend's error; its own first line is only "backend='inductor'
        # raised:": name the error underneath (a user's pass, a lowering failure)
        inner = getattr(exc, "inner_exception", None) or exc.__cause__
        why = (
            failures.first_line(exc)
            if inner is None
            else f"{failures.first_line(inner)} (inside Inductor)"
        )
        raise failures.CellEnded(
            *failures.failure_in_mode(cell, f"torch.compile failed: {why}")
        ) from None
    return compiled, seconds, out


def _cell_pass(cell):
    """The cell's custom graph passes as one composite pass, or None (compilekit/passes.py)."""
    if not cell.passes:
        return None
    from compilekit.passes import composite

    return composite(list(cell.passes))


def _compile_gpu_turn(cell, record: dict):
    """The GPU lock for a compile-only process, where its GPU work could change a figure:
    max-autotune benchmarks candidate kernels on the GPU, so it waits for the GPU alone. Other
    compiles run beside the GPU's current cell (a compile is CPU work and one first call;
    timing never overlaps them: it holds the CPU lock, which every compile shares)."""
    from compilekit import locks

    if cell.mode.startswith("max-autotune"):
        return locks.gpu_turn(record)
    return contextlib.nullcontext()


def run_cold(cell, cache_dir: str, result) -> None:
    """The first call in a clean process with empty caches -> cache_dir/cold.json (with this
    process's steps)."""
    from compilekit import diagnose, inputs, settings
    from compilekit.store import write_json

    with result.step("imports"):  # torch, and the variant's module
        import torch  # noqa: F401

        variant = failures.cell_variant(cell)
    with (
        _compile_gpu_turn(cell, result.steps_s),
        settings.toolkit_settings(cell.device, False, dict(cell.config), _cell_pass(cell)),
    ):
        with result.step("inputs"):
            args = inputs.make_inputs(cell.shape, cell.dtype, cell.device, cell.seed)
            # One eager call first, in every process: a variant that builds state on its
            # first call (naive's mask) is then compiled to the same graph in each of them;
            # it is also where a refusal of the variant itself shows.
            _eager_first(variant, args, cell)
        with result.step("compile_cold"), diagnose.autotune_choices() as tuned:
            _, cold_s, _ = _compiled_first_call(cell, variant, args)
    write_json(
        os.path.join(cache_dir, "cold.json"),
        {
            "compile_cold_s": cold_s,
            # only a compile that really autotunes (this one, caches empty) has choices to show
            "autotune": tuned,
            "measured_at": datetime.datetime.now().isoformat(timespec="seconds"),
            "steps_s": result.steps_s,
            "includes": "the first compiled call in a fresh process with empty Inductor caches "
            "(after one eager call): Dynamo trace, Inductor import and lowering, kernel "
            "compiles, the call itself",
        },
    )


def _capture_gpu_turn(cell, cache_dir: str, record: dict):
    """The capture compile's GPU lock: none once the cold process has run in this cache. There
    max-autotune tuned, into the cache, and this recompile reads its choices back and benchmarks
    nothing (seen on torch 2.11 and 2.13), so it need not wait for the GPU alone: in the H200
    blog matrix these processes ran 39-100 s each, waiting for the GPU and then holding it, for
    nothing. Should it tune again, the measure process says so (capture_note)."""
    if os.path.isfile(os.path.join(cache_dir, "cold.json")):
        return contextlib.nullcontext()
    return _compile_gpu_turn(cell, record)


RETUNED = "retuned.json"  # in capture/: the choices the capture compile tuned again, if any


def capture_note(cache_dir: str) -> str | None:
    """What the measure process must say about the capture compile: that it tuned again, beside
    other GPU work, so the kernel map it gave may name other choices than the timed compile's."""
    path = os.path.join(cache_dir, "capture", RETUNED)
    if not os.path.isfile(path):
        return None
    from compilekit.store import read_json

    ops = read_json(path)
    return (
        f"the capture compile tuned {len(ops)} op(s) again instead of reading the cold "
        "compile's choices, while the GPU was not its alone: the kernel map may name other "
        "choices than the timed compile's"
    )


def run_capture(cell, cache_dir: str, result) -> None:
    """Recompile with every capture on -> cache_dir/capture/{depyf/, graphs.json, steps.json}."""
    from compilekit import capture, diagnose, inputs, settings
    from compilekit.store import write_json

    with result.step("imports"):  # torch, and the variant's module
        import torch  # noqa: F401

        variant = failures.cell_variant(cell)
    capture_dir = os.path.join(cache_dir, "capture")
    graph_pass = _cell_pass(cell)
    with (
        _capture_gpu_turn(cell, cache_dir, result.steps_s),
        settings.toolkit_settings(cell.device, True, dict(cell.config), graph_pass),
    ):
        with result.step("inputs"):
            args = inputs.make_inputs(cell.shape, cell.dtype, cell.device, cell.seed)
            _eager_first(variant, args, cell)  # the same state as the other processes
        with (
            result.step("compile_capture"),
            capture.depyf_dump(os.path.join(capture_dir, "depyf")),
            diagnose.autotune_choices() as retuned,
        ):
            _compiled_first_call(cell, variant, args)
    if retuned:
        write_json(os.path.join(capture_dir, RETUNED), retuned)
    if graph_pass is not None:  # counted in a compile that really ran (FX caches off here)
        write_json(os.path.join(capture_dir, "passes.json"), graph_pass.stats)
    with result.step("read_trace"):
        graphs = capture.read_trace(os.environ.get("TORCH_TRACE", ""))
    write_json(os.path.join(capture_dir, "graphs.json"), graphs)
    write_json(os.path.join(capture_dir, "steps.json"), result.steps_s)


def run_measure(cell, stage_dir: str, cache_dir: str, result) -> None:
    """Warm compile, check, time, then profile and map, into `result` and stage_dir."""
    with result.step("imports"):  # torch, and the variant's module
        import torch

        from compilekit import envinfo, inputs, locks, modes, settings

        variant = failures.cell_variant(cell)
    result.torch_version = torch.__version__
    if reason := modes.unsupported_reason(cell.mode, cell.device):
        raise failures.CellEnded("unsupported", reason)
    with contextlib.ExitStack() as stack:
        if cell.mode != "eager":  # eager calls never read Inductor's config: spare its import
            with result.step("inductor_import_and_settings"):
                changes = stack.enter_context(
                    settings.toolkit_settings(
                        cell.device, False, dict(cell.config), _cell_pass(cell)
                    )
                )
            result.settings = {f"torch._inductor.config.{k}": v for k, v in changes.items()}
        # The GPU from here on, not before: the imports above are CPU work (they share the CPU
        # lock, so no timing overlaps them), and the GPU's current cell need not wait for them.
        stack.enter_context(locks.gpu_turn(result.steps_s))
        with result.step("device_init"):  # the first kernel: CUDA context, dtype support
            if reason := inputs.dtype_probe(cell.dtype, cell.device):
                raise failures.CellEnded("unsupported", reason)
        with result.step("inputs"):
            args = inputs.make_inputs(cell.shape, cell.dtype, cell.device, cell.seed)
            eager_out, result.eager_note = _eager_first(variant, args, cell)
            if eager_out is not None:
                _checked(eager_out, args[0], "eager:", result)
        compiled = variant.attention
        if cell.mode != "eager":
            compiled = _warm_compile(cell, variant, args, cache_dir, result)
        with result.step("first_check"):
            out = compiled(*args)
            _checked(out, args[0], "compiled:", result)
            del out
        # Timed before the float64 reference and the error check, in the order a user's
        # process (and verify's bare child) runs: inputs, one eager call, compile, time.
        with result.step("time"), locks.cpu_alone(result.steps_s):
            steady.time_cell(cell, variant, compiled, args, result)
        with result.step("reference_and_check"):
            ref, result.reference = inputs.reference_output(variant, *args)
            if eager_out is not None:
                result.eager_max_rel_err = inputs.max_rel_err(eager_out, ref)
            del eager_out
            # a fresh call, not the first check's output: a CUDA graph's output is overwritten
            # by the timed replays (torch then refuses to read the old one)
            result.max_rel_err = inputs.max_rel_err(compiled(*args), ref)
            result.error_bound = inputs.ERROR_BOUNDS[cell.dtype]
            del ref
        from compilekit.result import verdict

        result.status = verdict(
            result.max_rel_err,
            result.eager_max_rel_err,
            result.error_bound,
            variant.has_reference,
        )
        if result.status == "wrong":
            worst = max(result.max_rel_err, result.eager_max_rel_err or 0.0)
            result.reason = (
                f"max_rel_err {worst:.3g} over the {cell.dtype} bound {result.error_bound}"
            )
        evidence.gather(cell, compiled, args, stage_dir, cache_dir, result)
    result.env = envinfo.cell_env(cell.device)  # after the GPU work: it asks for the GPU's name


def _warm_compile(cell, variant, args, cache_dir: str, result):
    """The first call of a fresh wrapper with the caches filled (the warm compile), with the
    CUDA-graph skip reasons torch logs meanwhile."""
    from compilekit import diagnose, modes
    from compilekit.store import read_json

    cold = read_json(os.path.join(cache_dir, "cold.json"))
    with result.step("compile_warm"), diagnose.cudagraph_skip_reasons() as skip_reasons:
        compiled, warm_s, _ = _compiled_first_call(cell, variant, args)
    if cell.device == "cpu":
        # Inductor's compile workers keep cores busy after the compile; on a 2-core machine
        # they would be timed along with the kernels.
        from torch._inductor import async_compile

        if hasattr(async_compile, "shutdown_compile_workers"):
            with result.step("compile_workers_stop"):
                async_compile.shutdown_compile_workers()
    from torch._dynamo.utils import counters

    if cell.passes:
        result.pass_stats = read_json(os.path.join(cache_dir, "capture", "passes.json"))
    result.autotune = cold.get("autotune") or None
    result.compile_cold_s = cold["compile_cold_s"]
    result.compile_cold_measured_at = cold["measured_at"]
    result.compile_warm_s = warm_s
    _add_steps(result, "cold", cold.get("steps_s"))
    capture_steps = os.path.join(cache_dir, "capture", "steps.json")
    if os.path.isfile(capture_steps):
        _add_steps(result, "capture", read_json(capture_steps))
    result.compile_notes = {
        "cold": cold["includes"] + f" (measured {cold['measured_at']}, kept with the cache)",
        "warm": "the first call in a fresh process with the caches filled (this run)",
    }
    if note := capture_note(cache_dir):
        result.compile_notes["capture"] = note
    result.cudagraphs = diagnose.cudagraph_status(
        modes.uses_cudagraphs(cell.mode),
        cell.device,
        counters["inductor"].get("cudagraph_skips", 0),
        skip_reasons,
    )
    return compiled


def _add_steps(result, phase: str, steps) -> None:
    """The steps another process of the cell recorded, as `phase.step` in result.steps_s (a
    kept file's steps are only shown: what is not a number of seconds is left out)."""
    if isinstance(steps, dict):
        for name, seconds in steps.items():
            if isinstance(seconds, (int, float)) and not isinstance(seconds, bool):
                result.steps_s[f"{phase}.{name}"] = seconds


def main(argv: list[str]) -> int:
    phase, cell_json, stage_dir, cache_dir, timeout_s = argv
    reaper.die_with_parent_and_on_timeout(float(timeout_s), stage_dir)
    from compilekit import locks
    from compilekit.result import for_cell
    from compilekit.spec import Cell

    locks.adopt_inherited()
    cell = Cell.from_dict(json.loads(cell_json))
    result = for_cell(cell, processes={phase: PROCESS_NOTES[phase]})
    spawned_at = os.environ.get("COMPILEKIT_SPAWNED_AT")
    if spawned_at:  # interpreter start and compilekit's imports, before this line ran
        result.steps_s["process_start"] = round(time.time() - float(spawned_at), 3)
    try:
        if phase == "cold":
            run_cold(cell, cache_dir, result)
        elif phase == "capture":
            run_capture(cell, cache_dir, result)
        else:
            run_measure(cell, stage_dir, cache_dir, result)
    except failures.CellEnded as ended:
        failures.record_end(result, ended)
    except Exception as exc:  # the toolkit's own failure, or the user's code in a new place
        traceback.print_exc()
        failures.record_end(result, failures.failure_outside_probe(cell, exc))
    if phase == "measure" or result.reason:  # measured, or the cell ended in this phase
        result.save(stage_dir)
    print(f"{phase} process: {time.perf_counter() - PROCESS_START:.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    reaper.exit_now(main(sys.argv[1:]))
