"""One cell in its own process: inputs -> check -> compile -> time -> profile -> capture -> map.

`python -m compilekit.runner CELL_JSON STAGING_DIR CACHE_DIR` is what `launch` spawns. The parent
sets TORCHINDUCTOR_CACHE_DIR and TORCH_TRACE before torch is imported here, and moves the staging
directory into place only when this process has finished (the run directory appears atomically).

Exit codes: 0 measured (result.json says whether it was correct), 3 unsupported (the reason is in
result.json), anything else a crash the parent records.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import shutil
import sys
import time
import traceback
import warnings

PROCESS_START = time.perf_counter()
# Cell processes this process started and has not yet seen end: each runs in its own session
# (so a timeout can end its compile workers too), which also keeps Ctrl-C from reaching it.
_RUNNING: set = set()
EXIT_UNSUPPORTED = 3
RESULT_VERSION = 1


@contextlib.contextmanager
def _step(result: dict, name: str):
    """Record how long one step of the cell took, in result["steps_s"][name]."""
    start = time.perf_counter()
    try:
        yield
    finally:
        result.setdefault("steps_s", {})[name] = round(time.perf_counter() - start, 3)


def _prewarm(device: str, compiles: bool, captures: bool) -> None:
    """Pay the one-time costs that put no work on the GPU before taking the GPU's lock: the
    CUDA context, CUPTI's start (seconds, in the first profiler session of a process) and, only
    where this cell needs them, Inductor's and depyf's imports."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    if compiles:
        import torch._inductor.compile_fx  # noqa: F401  (the heaviest import of a compile)
    if captures:
        import depyf  # noqa: F401
    if device == "cuda":
        torch.cuda.init()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]):
            pass


@contextlib.contextmanager
def gpu_lock(result: dict):
    """Hold the GPU alone while this cell uses it (compile, check, time, profile).

    A sweep that runs several cell processes per GPU sets COMPILEKIT_GPU_LOCK to one file per
    GPU: their start-up overlaps, their GPU work never does. Without it, no lock is taken.
    """
    path = os.environ.get("COMPILEKIT_GPU_LOCK")
    if not path:
        yield
        return
    import fcntl

    start = time.perf_counter()
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        result["gpu_lock_wait_s"] = round(time.perf_counter() - start, 3)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _write_json(path: str, data) -> None:
    with open(path + ".tmp", "w") as f:
        json.dump(data, f, indent=2, default=str)
    os.replace(path + ".tmp", path)


def _tflops(shape, ms: float | None) -> float | None:
    return shape.causal_flop() / (ms * 1e-3) / 1e12 if ms else None


def _unsupported(result: dict, stage_dir: str, reason: str) -> int:
    result.update(ok=False, unsupported=reason, error=None)
    _write_json(os.path.join(stage_dir, "result.json"), result)
    return EXIT_UNSUPPORTED


def _eager_probe(fn, args):
    """Run the variant once eagerly; if it cannot, torch's own error and the warnings that
    explain it."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            return fn(*args), None
        except Exception as exc:  # any failure here means "this device cannot run this variant"
            why = [
                str(w.message).splitlines()[0]
                for w in caught
                if "kernel not used" in str(w.message)
                or "not supported" in str(w.message)
                or "requires" in str(w.message)
            ]
            head = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            return None, "; ".join([head] + why[:4])


def _cold_compile(cell, variant, args, cache_dir: str) -> dict:
    """First compile into an empty cache, with the depyf dump and provenance capture on.

    Stores in cache_dir: cold.json (the measurement) and capture/ (depyf dump, graphs.json with
    what TORCH_TRACE recorded), so later runs of this cell reuse both.
    """
    import torch

    from compilekit import capture, modes

    capture_dir = os.path.join(cache_dir, "capture")
    shutil.rmtree(capture_dir, ignore_errors=True)
    os.makedirs(capture_dir)
    with capture.capture(os.path.join(capture_dir, "depyf")):
        cold_s, _ = _first_call(modes.build(cell.mode, variant.attention), args, cell.device)
    _write_json(
        os.path.join(capture_dir, "graphs.json"),
        capture.read_trace(os.environ.get("TORCH_TRACE", "")),
    )
    cold = {
        "compile_cold_s": cold_s,
        "with_capture": True,
        "measured_at": datetime.datetime.now().isoformat(timespec="seconds"),
    }
    _write_json(os.path.join(cache_dir, "cold.json"), cold)
    torch._dynamo.reset()  # the next compile starts from Dynamo's scratch, caches filled
    return cold


def _compile(cell, variant, args, stage_dir: str, cache_dir: str, result: dict):
    """Cold compile (captured) if the cache is empty, then a warm compile; returns the callable
    and the captured graphs."""
    from compilekit import diagnose, modes

    cold_path = os.path.join(cache_dir, "cold.json")
    capture_dir = os.path.join(cache_dir, "capture")
    measured_now = not os.path.exists(cold_path)
    with diagnose.cudagraph_skip_reasons() as skip_reasons:
        if measured_now:
            with _step(result, "compile_cold"):
                cold = _cold_compile(cell, variant, args, cache_dir)
        else:
            with open(cold_path) as f:
                cold = json.load(f)
        with _step(result, "compile_warm"):
            compiled = modes.build(cell.mode, variant.attention)
            warm_s, _ = _first_call(compiled, args, cell.device)
    if cell.device == "cpu":
        with _step(result, "compile_workers_stop"):
            # Inductor's compile workers keep cores busy after the compile; on a 2-core machine
            # they would be timed along with the kernels. (On a GPU they only sit idle, and
            # stopping them cost 5-7 s per cell on the H200 machine.)
            from torch._inductor import async_compile

            if hasattr(async_compile, "shutdown_compile_workers"):
                async_compile.shutdown_compile_workers()
    from torch._dynamo.utils import counters

    result.update(
        compile_cold_s=cold["compile_cold_s"],
        compile_warm_s=warm_s,
        compile_cold_measured_at=cold["measured_at"],
        compile_cold_note=(
            "measured in this run, with the depyf/provenance capture on"
            if measured_now
            else "from the first run of this cell (cache kept in "
            f"{cache_dir}); FRESH=1 measures it again"
        ),
        compile_warm_note=(
            "same process as the cold compile, after torch._dynamo.reset()"
            if measured_now
            else "a new process, caches filled"
        ),
        cudagraphs=diagnose.cudagraph_status(
            modes.uses_cudagraphs(cell.mode),
            cell.device,
            counters["inductor"].get("cudagraph_skips", 0),
            skip_reasons,
        ),
        dynamo=diagnose.dynamo_counters(),
    )
    with _step(result, "capture_copy"):
        if os.path.isdir(os.path.join(capture_dir, "depyf")):
            shutil.copytree(os.path.join(capture_dir, "depyf"), os.path.join(stage_dir, "depyf"))
        with open(os.path.join(capture_dir, "graphs.json")) as f:
            return compiled, json.load(f)


def _first_call(fn, args, device):
    from compilekit import timing

    return timing.first_call_s(fn, args, device)


def run_cell(cell, stage_dir: str, cache_dir: str) -> int:
    """Measure one cell into stage_dir; returns the process exit code."""
    import torch

    from compilekit import modes
    from compilekit.variant import load_variant

    result = {
        "format_version": RESULT_VERSION,
        **cell.to_dict(),
        "torch_version": torch.__version__,
        "ok": False,
        "unsupported": None,
        "error": None,
        "steps_s": {"start_and_import": round(time.perf_counter() - PROCESS_START, 3)},
    }
    if reason := modes.unsupported_reason(cell.mode, cell.device):
        return _unsupported(result, stage_dir, reason)
    if cell.device == "cpu":
        # C++ kernels appear in the profiler only when Inductor wraps them in RECORD_FUNCTION.
        torch._inductor.config.cpp.enable_kernel_profile = True
    variant = load_variant(cell.variant)
    with _step(result, "prewarm"):
        compiles = cell.mode != "eager"
        _prewarm(
            cell.device,
            compiles,
            compiles and not os.path.exists(os.path.join(cache_dir, "cold.json")),
        )
    with gpu_lock(result):
        return _measure(cell, variant, result, stage_dir, cache_dir)


def _measure(cell, variant, result: dict, stage_dir: str, cache_dir: str) -> int:
    """Steps 1-10 for one cell, once the device is ours."""
    import torch

    from compilekit import capture, diagnose, inputs, kernelmap, profiling, timing

    if reason := inputs.dtype_probe(cell.dtype, cell.device):
        return _unsupported(result, stage_dir, reason)
    with _step(result, "inputs"):
        args = inputs.make_inputs(cell.shape, cell.dtype, cell.device, cell.seed)
        eager_out, reason = _eager_probe(variant.attention, args)
    if reason:
        return _unsupported(
            result,
            stage_dir,
            f"variant {cell.variant!r} cannot run on "
            f"{cell.device} {cell.dtype} at {cell.shape}: {reason}",
        )
    with _step(result, "reference"):
        ref = inputs.reference_output(variant, *args)
    bound = inputs.ERROR_BOUNDS[cell.dtype]
    result.update(eager_max_rel_err=inputs.max_rel_err(eager_out, ref), error_bound=bound)
    del eager_out

    compiled, graphs = variant.attention, {}
    result.update(compile_cold_s=0.0, compile_warm_s=0.0)
    if cell.mode != "eager":
        with _step(result, "compile"):
            compiled, graphs = _compile(cell, variant, args, stage_dir, cache_dir, result)
    out = compiled(*args)
    result["max_rel_err"] = inputs.max_rel_err(out, ref)
    result["ok"] = result["max_rel_err"] <= bound and result["eager_max_rel_err"] <= bound
    del out, ref

    with _step(result, "time"):
        eager = timing.bench(variant.attention, args, cell.device)
        steady = eager if cell.mode == "eager" else timing.bench(compiled, args, cell.device)
    result.update(
        eager_ms=eager["median_ms"],
        compiled_ms=steady["median_ms"],
        eager_timing=eager,
        compiled_timing=steady,
        speedup=eager["median_ms"] / steady["median_ms"],
        tflops=_tflops(cell.shape, steady["median_ms"]),
        eager_tflops=_tflops(cell.shape, eager["median_ms"]),
    )
    if cell.device == "cuda":
        torch.cuda.reset_peak_memory_stats()
        compiled(*args)
        torch.cuda.synchronize()
        result["peak_memory_mb"] = torch.cuda.max_memory_allocated() / 2**20

    label = f"{cell.variant}/{cell.mode}"
    with _step(result, "profile"):
        prof = profiling.run_profiler(compiled, args, label, cell.device, stage_dir)
        forward = profiling.forward_kernels(prof, label, cell.device)
        eager_lines = (
            profiling.eager_source_lines(compiled, args) if cell.mode == "eager" else None
        )
        op_rows = profiling.op_table(prof, cell.device)
        _write_json(os.path.join(stage_dir, "ops.json"), op_rows)
    with _step(result, "map"):
        # the two inputs of the map, kept so it can be read (and rebuilt) without a GPU
        _write_json(os.path.join(stage_dir, "provenance.json"), graphs)
        _write_json(os.path.join(stage_dir, "forward.json"), forward)
        kernel_files = capture.write_kernels(graphs, stage_dir)
        records = kernelmap.build_map(
            forward, graphs, kernel_files, stage_dir, cell.mode != "eager", eager_lines
        )
        _write_json(
            os.path.join(stage_dir, "kernels.json"),
            {
                "forward_device_ms": forward["forward_device_ms"],
                "forward_host_ms": forward["forward_host_ms"],
                "kernels_per_forward": forward["kernels_per_forward"],
                "kernels": records,
                "by_source_line": kernelmap.by_source_line(records),
            },
        )
    result.update(
        kernels_per_forward=forward["kernels_per_forward"],
        profiled_forward_device_ms=forward["forward_device_ms"],
        profiled_forward_host_ms=forward["forward_host_ms"],
        sdpa_backend=diagnose.sdpa_backend(records, [row["name"] for row in op_rows]),
        attention_rewrite=(
            diagnose.attention_rewrite(result["dynamo"], records) if "dynamo" in result else None
        ),
    )
    _write_json(os.path.join(stage_dir, "result.json"), result)
    return 0


def main(argv: list[str]) -> int:
    from compilekit.spec import Cell

    cell_json, stage_dir, cache_dir = argv
    cell = Cell.from_dict(json.loads(cell_json))
    os.makedirs(stage_dir, exist_ok=True)
    os.makedirs(cache_dir, exist_ok=True)
    start = time.perf_counter()
    try:
        code = run_cell(cell, stage_dir, cache_dir)
    except Exception as exc:
        traceback.print_exc()
        result_path = os.path.join(stage_dir, "result.json")
        _write_json(
            result_path,
            {
                "format_version": RESULT_VERSION,
                **cell.to_dict(),
                "ok": False,
                "unsupported": None,
                "error": f"{type(exc).__name__}: {str(exc).strip()[:2000]}",
            },
        )
        code = 1
    print(f"cell process: {time.perf_counter() - start:.1f} s", file=sys.stderr)
    return code


def cache_dir_for(cell, cache_root: str) -> str:
    """The cell's own Inductor cache: keyed by everything that changes the generated code."""
    import hashlib
    import platform

    import torch

    from compilekit.variant import load_variant

    key = json.dumps(
        [
            cell.variant,
            load_variant(cell.variant).source_hash(),
            cell.mode,
            str(cell.shape),
            cell.dtype,
            cell.device,
            torch.__version__,
            platform.python_version(),
        ]
    )
    return os.path.join(
        cache_root, cell.label() + "-" + hashlib.sha256(key.encode()).hexdigest()[:12]
    )


def _kill(proc) -> None:
    import signal

    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def stop_running() -> None:
    """End every cell process still running (the CLI calls this on Ctrl-C)."""
    for proc in list(_RUNNING):
        _kill(proc)


def default_cache_root() -> str:
    return os.environ.get("COMPILEKIT_CACHE") or os.path.join(
        os.path.expanduser("~"), ".cache", "compilekit"
    )


def launch(
    cell,
    out_dir: str,
    cache_root: str | None = None,
    fresh: bool = False,
    timeout_s: float = 1800,
    env: dict | None = None,
) -> dict:
    """Run one cell in a fresh subprocess and move its run directory into out_dir atomically.

    Returns result.json's content plus `run_dir` and `exit_code`. A crash, a timeout or a CUDA
    error stays in that process: the result records it and the caller goes on.
    """
    import subprocess

    cache_dir = cache_dir_for(cell, cache_root or default_cache_root())
    if fresh or not os.path.exists(os.path.join(cache_dir, "cold.json")):
        # no finished cold measurement (or asked to start over): whatever an interrupted compile
        # left in the cache would make the next "cold" compile partly warm
        shutil.rmtree(cache_dir, ignore_errors=True)
    run_dir = os.path.join(out_dir, cell.label())
    stage_dir = f"{run_dir}.tmp-{os.getpid()}"
    shutil.rmtree(stage_dir, ignore_errors=True)
    os.makedirs(stage_dir)
    child_env = {
        **os.environ,
        **(env or {}),
        "TORCHINDUCTOR_CACHE_DIR": os.path.join(cache_dir, "inductor"),
        "TORCH_TRACE": os.path.join(stage_dir, "torch_trace"),
        "PYTHONUNBUFFERED": "1",
    }
    if os.path.exists(os.path.join(cache_dir, "cold.json")):
        # Warm: every kernel comes from the cache, so a pool of compile workers would only cost
        # its start-up (seconds, and CPU taken from the timed calls).
        child_env.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    child_env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, child_env.get("PYTHONPATH")]))
    cmd = [
        sys.executable,
        "-m",
        "compilekit.runner",
        json.dumps(cell.to_dict()),
        stage_dir,
        cache_dir,
    ]
    start = time.perf_counter()
    with open(os.path.join(stage_dir, "log.txt"), "w") as log:
        # its own process group, so a timeout also ends the compile workers it started
        proc = subprocess.Popen(
            cmd, env=child_env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        _RUNNING.add(proc)
        try:
            code = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            _kill(proc)
            code = "timeout"
        finally:
            _RUNNING.discard(proc)
    result_path = os.path.join(stage_dir, "result.json")
    if os.path.exists(result_path):
        with open(result_path) as f:
            result = json.load(f)
    else:
        with open(os.path.join(stage_dir, "log.txt"), errors="replace") as f:
            tail = f.read()[-1500:].strip()
        why = f"timed out after {timeout_s:.0f} s" if code == "timeout" else f"exit code {code}"
        result = {
            "format_version": RESULT_VERSION,
            **cell.to_dict(),
            "ok": False,
            "unsupported": None,
            "error": f"cell process died ({why}): {tail}",
        }
    result["wall_s"] = time.perf_counter() - start
    _write_json(result_path, result)
    old = f"{run_dir}.old-{os.getpid()}"
    if os.path.exists(run_dir):
        os.replace(run_dir, old)
    os.replace(stage_dir, run_dir)
    shutil.rmtree(old, ignore_errors=True)
    return {**result, "run_dir": run_dir, "exit_code": code}


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
