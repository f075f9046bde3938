"""The warm compile of a measure process: the first call of a fresh torch.compile wrapper with
the caches filled, and what the cold and capture processes recorded beside it."""

from __future__ import annotations

import os

from compilekit.launch import calls, coldphase


def warm_compile(cell, variant, args, cache_dir: str, result):
    """The first call of a fresh wrapper with the caches filled (the warm compile), with the
    CUDA-graph skip reasons torch logs meanwhile."""
    from compilekit.compile import modes
    from compilekit.evidence import diagnose
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
    from torch._dynamo.utils import counters

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


def read_capture(cell, cache_dir: str, result) -> None:
    """What the capture recompile left beside the cache: its graph pass counts, its steps, and
    the note if it tuned again (coldphase.capture_note)."""
    from compilekit.model.store import read_json

    if cell.passes:
        result.pass_stats = read_json(os.path.join(cache_dir, "capture", "passes.json"))
    capture_steps = os.path.join(cache_dir, "capture", "steps.json")
    if os.path.isfile(capture_steps):
        add_steps(result, "capture", read_json(capture_steps))
    if note := coldphase.capture_note(cache_dir):
        result.compile_notes["capture"] = note


def add_steps(result, phase: str, steps) -> None:
    """The steps another process of the cell recorded, as `phase.step` in result.steps_s (a
    kept file's steps are only shown: what is not a number of seconds is left out)."""
    if isinstance(steps, dict):
        for name, seconds in steps.items():
            if isinstance(seconds, (int, float)) and not isinstance(seconds, bool):
                result.steps_s[f"{phase}.{name}"] = seconds
