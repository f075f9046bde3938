"""The cold process of a cell (`python -m compilekit.launch.cell cold ...`): a fresh process with
empty caches and nothing of the toolkit's switched on times the first compiled call (what a user
waits for) into CACHE_DIR/cold.json; then, in the same process and with nothing timed any more,
it compiles again with every capture on, into CACHE_DIR/capture/.

The capture recompile runs here rather than in a process of its own: a fresh process would pay
torch's and Inductor's imports again (seconds each) for a compile that takes seconds.
Under max-autotune it does get a process of its own (`capture`, separate_capture): there a
recompile in the same process names its template kernels with the next numbers of torch's
counters, so their keys miss the autotune cache and it would tune again (on the GPU, beside
another cell's timing), where a fresh process reads the cold compile's choices back.
"""

from __future__ import annotations

import datetime
import os
import time

from compilekit.measure import calls, failures

COLD_INCLUDES = (
    "the first compiled call in a fresh process with empty Inductor caches (after one eager "
    "call): Dynamo trace, Inductor import and lowering, kernel compiles, the call itself"
)
COLD_CPU = (
    "; not Inductor's CPU ISA probes, a machine's one-time builds that a user's cache holds "
    "(kept in a folder every cell shares)"
)
# A first run's cold (under max-autotune: capture) and measure processes start together
# (runner._beside_measure):
BESIDE_ENV = "COMPILEKIT_COLD_BESIDE_MEASURE"
COLD_LOCK = "cold.lock"  # in the cache folder: held by that process from birth to death
IMPORTED = "measure.imported"  # in the cache folder: the measure process has done its imports


class ColdEnded(Exception):
    """The measure process found no cold compile to follow: the cold process ended the cell,
    and the parent reports how."""


def wait_for_measure_imports(cache_dir: str, result) -> None:
    """In the cold process, started beside the measure process: wait for its imports to be done
    before the cold compile, so the cold figure has no other process's work beside it."""
    if not os.environ.get(BESIDE_ENV):
        return
    with result.step("wait_for_measure_imports"):
        while not os.path.exists(os.path.join(cache_dir, IMPORTED)):
            time.sleep(0.01)


def wait_for_cold(cache_dir: str, result, cell=None) -> None:
    """In the measure process, started beside the cold process (under max-autotune, the
    capture process, after the cold one): say its imports are done, then wait for that process
    to end, with the cache filled. Where the capture may run beside
    (capture_beside), only the cold compile's record is needed now: wait_for_capture waits for
    the rest before the kernel map. ColdEnded where no cold figure or capture was left."""
    if not os.environ.get(BESIDE_ENV):
        return
    later = cell is not None and capture_beside(cell)
    with result.step("wait_for_cold"):
        open(os.path.join(cache_dir, IMPORTED), "w").close()
        if not later:  # the capture starts only after the cold process ended: nothing to wait
            _wait_for_end(cache_dir)
    _left_behind(cache_dir, only_cold=later)


def _left_behind(cache_dir: str, only_cold: bool = False) -> None:
    """ColdEnded unless the cold process (only_cold) or the cold and capture processes left
    their files (cache.COLD_FILES) in the cache."""
    from compilekit.launch.cache import COLD_FILES

    needed = COLD_FILES[:1] if only_cold else COLD_FILES
    if not all(os.path.isfile(os.path.join(cache_dir, f)) for f in needed):
        raise ColdEnded


def _wait_for_end(cache_dir: str) -> None:
    """Wait for the process before measure to end: it holds COLD_LOCK from birth to death."""
    import fcntl

    from compilekit.model.store import open_lock

    fd = open_lock(os.path.join(cache_dir, COLD_LOCK))
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
    finally:
        os.close(fd)


def capture_beside(cell) -> bool:
    """Whether the measure process lets max-autotune's capture process (its recompile with
    every capture on: tens of seconds) run beside its warm compile and timed calls, and waits
    for it only before the kernel map: in a sweep that gave the timed calls a core of their own
    (locks.QUIET_ENV) and the GPU a lock, so the capture compiles on other cores and its kernels
    wait for the figures. A single run waits for it first: nothing keeps it off the timing."""
    from compilekit.measure import locks

    return (
        separate_capture(cell)
        and bool(os.environ.get(locks.QUIET_ENV))
        and bool(os.environ.get("COMPILEKIT_GPU_LOCK"))
    )


def wait_for_capture(cell, cache_dir: str, result) -> None:
    """In a measure process whose capture ran beside it (capture_beside): wait for the capture
    process to end. ColdEnded where it left no capture."""
    if not (os.environ.get(BESIDE_ENV) and capture_beside(cell)):
        return
    with result.step("wait_for_capture"):
        _wait_for_end(cache_dir)
    _left_behind(cache_dir)


def separate_capture(cell) -> bool:
    """Whether the capture recompile needs a fresh process of its own (max-autotune)."""
    return cell.mode.startswith("max-autotune")


def run_cold(cell, cache_dir: str, result) -> None:
    """The cold first call -> cache_dir/cold.json, then (unless separate_capture) the capture
    -> cache_dir/capture/."""
    with result.step("imports"):  # torch, Inductor's config, and the variant's module
        import torch  # noqa: F401
        import torch._inductor.config  # noqa: F401  (toolkit_settings would import it)

        from compilekit.compile import settings
        from compilekit.evidence import diagnose
        from compilekit.measure import inputs, locks
        from compilekit.model.store import write_json

        variant = failures.cell_variant(cell)
        if cell.device == "cpu":  # ISA probes while the measure process imports, not after
            settings.shared_isa_probes()
    calls.make_device_context(cell.device, result)
    wait_for_measure_imports(cache_dir, result)
    with (  # the GPU last: what comes before it is CPU work, other cells' figures need not wait
        settings.toolkit_settings(cell.device, False, dict(cell.config), calls.cell_pass(cell)),
        locks.gpu_shared_between_compiles(result.steps_s),
    ):
        with result.step("inputs"):
            args = inputs.cell_inputs(variant, cell)
            # One eager call first, in every process: a variant that builds state on its
            # first call (naive's mask) is then compiled to the same graph in each of them;
            # it is also where a refusal of the variant itself shows.
            calls.eager_first(variant, args, cell)
        with result.step("compile_cold"), diagnose.autotune_choices() as tuned:
            compiled, cold_s, out = calls.compiled_first_call(cell, variant, args, result.steps_s)
        del compiled, out  # a CUDA graph's memory pool goes with them
    write_json(
        os.path.join(cache_dir, "cold.json"),
        {
            "compile_cold_s": cold_s,
            # only a compile that really autotunes (this one, caches empty) has choices to show
            "autotune": tuned,
            "measured_at": datetime.datetime.now().isoformat(timespec="seconds"),
            "steps_s": dict(result.steps_s),
            "includes": COLD_INCLUDES + (COLD_CPU if cell.device == "cpu" else ""),
        },
    )
    if not separate_capture(cell):
        result.steps_s.clear()
        _capture(cell, variant, args, os.path.join(cache_dir, "capture"), result)


def run_capture(cell, cache_dir: str, result) -> None:
    """The capture recompile in a fresh process of its own, after the cold one."""
    from compilekit.measure import inputs, locks

    with result.step("imports"):  # torch, and the variant's module
        import torch  # noqa: F401

        variant = failures.cell_variant(cell)
    calls.make_device_context(cell.device, result)
    with locks.gpu_shared(result.steps_s), result.step("inputs"):
        args = inputs.cell_inputs(variant, cell)
        calls.eager_first(variant, args, cell)  # the same state as the other processes
    _capture(cell, variant, args, os.path.join(cache_dir, "capture"), result)


def _capture(cell, variant, args, capture_dir: str, result) -> None:
    """Recompile with every capture on -> capture_dir/{depyf/, torch_trace/, graphs.json,
    passes.json, steps.json}. The GPU shared, not alone: max-autotune's choices are read back
    from the cold compile's cache, nothing is benchmarked (should it tune again, RETUNED says so
    and the measure process passes it on: measure/cell.py's read_capture)."""
    from compilekit.compile import capture, settings
    from compilekit.evidence import diagnose
    from compilekit.measure import locks
    from compilekit.measure.cell import RETUNED
    from compilekit.model.store import write_json

    graph_pass = calls.cell_pass(cell)  # a fresh one: its counts are this compile's
    with (
        result.step("compile_capture"),
        settings.toolkit_settings(cell.device, True, dict(cell.config), graph_pass),
        capture.capture_on(capture_dir),
        diagnose.autotune_choices() as retuned,
        locks.gpu_shared_between_compiles(result.steps_s),  # last: the rest is CPU work
    ):
        calls.compiled_first_call(cell, variant, args)
    if retuned:
        write_json(os.path.join(capture_dir, RETUNED), retuned)
    if graph_pass is not None:  # counted in a compile that really ran (FX caches off here)
        write_json(os.path.join(capture_dir, "passes.json"), graph_pass.stats)
    with result.step("read_trace"):
        graphs = capture.read_trace(os.path.join(capture_dir, "torch_trace"))
    write_json(os.path.join(capture_dir, "graphs.json"), graphs)
    write_json(os.path.join(capture_dir, "steps.json"), result.steps_s)
