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
import shutil
import signal
import sys
import threading
import time
import traceback

PROCESS_START = time.perf_counter()

PROCESS_NOTES = {
    "cold": "a fresh process with empty caches and no toolkit hook: the first call only",
    "capture": "a separate recompile with depyf, provenance and TORCH_TRACE on (FX/AOT caches "
    "off): the dump and the kernel -> source line mapping; nothing timed",
    "measure": "a fresh process, caches filled: warm first call, timed calls (no profiler, hook "
    "or float64 reference before them), then check, profile and kernel map",
}
# Past this ratio of the timed samples' p90 to the fastest, another process most likely competed.
NOISY_SPREAD = 1.5
# Other processes keeping this many cores busy (or the hypervisor stealing them) while a cell is
# timed disturb it: the timed phase is meant to have the CPU to itself (compilekit/cpuwatch.py).
# At least one core, and a quarter of the machine's: a daemon busy on one core of 16 leaves the
# timed thread its own core, and would otherwise mark every cell of a sweep as disturbed.
BUSY_OTHERS_CORES = 1.0
BUSY_OTHERS_SHARE = 0.25
# A disturbed timing is taken again this many times at most, each after a pause.
RETIMES = 2
RETIME_PAUSE_S = 1.0
# Under this share of each call busy on the GPU, the call is host-bound.
HOST_BOUND_SHARE = 0.8


class CellEnded(Exception):
    """The cell cannot go on: its status (unsupported, failed, wrong) and the reason."""

    def __init__(self, status: str, reason: str, out_of_memory: bool = False):
        super().__init__(reason)
        self.status, self.reason, self.out_of_memory = status, reason, out_of_memory


# Left in the stage folder by a cell process that ended itself at its timeout: the parent
# reads the failure from it, not from the log's words.
TIMED_OUT = "timed_out"


def _die_with_parent_and_on_timeout(timeout_s: float, stage_dir: str) -> None:
    """No orphans: the kernel kills this process when its parent dies (PR_SET_PDEATHSIG), and a
    watchdog ends the whole process group (compile workers too) at the timeout, after leaving
    TIMED_OUT in the stage folder."""
    import ctypes

    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass  # not Linux: the parent's own timeout and kill remain
    parent = os.environ.get("COMPILEKIT_PARENT_PID")
    if parent and os.getppid() != int(parent):  # the parent died before prctl took effect
        os._exit(1)

    def expire():
        print(f"compilekit: cell timed out after {timeout_s:.0f} s; ending it", flush=True)
        with contextlib.suppress(OSError):
            open(os.path.join(stage_dir, TIMED_OUT), "w").close()
        os.killpg(os.getpgrp(), signal.SIGKILL)

    timer = threading.Timer(timeout_s, expire)
    timer.daemon = True
    timer.start()


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0][:400]}" if text else type(exc).__name__


# torch's own words for "this device / dtype / backend does not do that"
REFUSALS = (
    "No available kernel",
    "No viable backend",
    "not implemented for '",
    "Could not run '",
    "is not supported on",
)


def out_of_memory(exc: BaseException, shape) -> CellEnded | None:
    """The cell's end where exc is the GPU (or host) running out of memory, wherever in the
    cell it happened, else None. Every such reason starts "out of memory": a sweep that ran the
    cell beside others runs it again alone (sweep.out_of_memory)."""
    import re

    import torch

    text = str(exc)
    if not (isinstance(exc, torch.OutOfMemoryError) or "out of memory" in text.lower()):
        return None
    size = re.search(r"allocate ([\d.]+ [KMGT]i?B)", text) or re.search(
        r"allocate (\d+) bytes", text
    )
    # torch names each other process on the GPU with its share ("Process 3017 has 53.48
    # GiB memory in use"): a cell beside others in a sweep may fit when it runs alone
    others = sum(float(g) for g in re.findall(r"Process \d+ has ([\d.]+) GiB memory", text))
    fix = "try a smaller shape"
    if others >= 1:
        fix = f"other processes held {others:.1f} GiB of the GPU: run it alone, or {fix}"
    elif not size:  # the driver's bare "CUDA error: out of memory" names neither
        fix = f"{_first_line(exc)}; run it alone, or {fix}"
    if not size:
        return CellEnded("failed", f"out of memory at shape {shape}: {fix}", True)
    amount = f"{int(size[1]) / 2**30:.2f} GiB" if size[1].isdigit() else size[1]
    return CellEnded("failed", f"out of memory allocating {amount} at shape {shape}: {fix}", True)


def classify(exc: BaseException, shape) -> CellEnded:
    """An exception from running the variant eagerly, as the cell's status and reason."""
    from compilekit.errors import Unsupported

    short = out_of_memory(exc, shape)
    if short:
        return short
    text = str(exc)
    if isinstance(exc, Unsupported) or any(r in text for r in REFUSALS):
        return CellEnded("unsupported", _first_line(exc).split(": ", 1)[-1])
    return CellEnded("failed", f"the variant raised {_first_line(exc)} (traceback in log.txt)")


_LOADED: dict = {}  # variant spec -> Variant, as this process imported it


def cell_variant(cell):
    """The cell's variant, imported once per process: a user's file runs its top level once,
    and what a failure is checked against below is what ran."""
    if cell.variant not in _LOADED:
        from compilekit.variant import load_variant

        _LOADED[cell.variant] = load_variant(cell.variant)
    return _LOADED[cell.variant]


def failure_in_mode(cell, what: str) -> tuple[str, str]:
    """(status, reason) for a cell that failed under its mode (compiling, or a compiled call):
    `unsupported` where the variant declares that mode a known limitation (KNOWN_LIMITS, with
    torch's words beside its reason), else `failed`. A failure of the eager probe is never
    explained this way: there the variant itself fails."""
    variant = _LOADED.get(cell.variant)  # None: it failed before the variant was imported
    why = variant.known_limits.get(cell.mode) if variant else None
    return ("unsupported", f"{why} (torch: {what})") if why else ("failed", what)


def failure_outside_probe(cell, exc: BaseException) -> CellEnded:
    """The end of a cell whose process raised outside the eager probe: out of memory in
    out_of_memory's words (making the inputs beside a neighbour's 128 GiB eager call ran out on
    the H200), else failure_in_mode with torch's first line."""
    short = out_of_memory(exc, cell.shape)
    if short:
        return short
    return CellEnded(*failure_in_mode(cell, f"{_first_line(exc)} (traceback in log.txt)"))


def _eager_probe(variant, args, cell):
    """Run the variant once eagerly: its output, or CellEnded with torch's words (and the
    warnings that explain a refusal)."""
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            return variant.attention(*args)
        except Exception as exc:
            traceback.print_exc()
            ended = classify(exc, cell.shape)
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
    except CellEnded as ended:
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
        raise CellEnded(status, f"{what} {problem}")


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
        why = _first_line(exc) if inner is None else f"{_first_line(inner)} (inside Inductor)"
        raise CellEnded(*failure_in_mode(cell, f"torch.compile failed: {why}")) from None
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


def run_cold(cell, cache_dir: str, record: dict) -> None:
    """The first call in a clean process with empty caches -> cache_dir/cold.json."""
    from compilekit import diagnose, inputs, settings
    from compilekit.store import write_json

    variant = cell_variant(cell)
    with (
        _compile_gpu_turn(cell, record),
        settings.toolkit_settings(cell.device, False, dict(cell.config), _cell_pass(cell)),
    ):
        args = inputs.make_inputs(cell.shape, cell.dtype, cell.device, cell.seed)
        # One eager call first, in every process: a variant that builds state on its first
        # call (naive's mask) is then compiled to the same graph in each of them; it is also
        # where a refusal of the variant itself shows.
        _eager_first(variant, args, cell)
        with diagnose.autotune_choices() as tuned:  # max-autotune prints its choices
            _, cold_s, _ = _compiled_first_call(cell, variant, args)
    write_json(
        os.path.join(cache_dir, "cold.json"),
        {
            "compile_cold_s": cold_s,
            # only a compile that really autotunes (this one, caches empty) has choices to show
            "autotune": tuned,
            "measured_at": datetime.datetime.now().isoformat(timespec="seconds"),
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


def run_capture(cell, cache_dir: str, record: dict) -> None:
    """Recompile with every capture on -> cache_dir/capture/{depyf/, graphs.json}."""
    from compilekit import capture, diagnose, inputs, settings
    from compilekit.store import write_json

    variant = cell_variant(cell)
    capture_dir = os.path.join(cache_dir, "capture")
    graph_pass = _cell_pass(cell)
    with (
        _capture_gpu_turn(cell, cache_dir, record),
        settings.toolkit_settings(cell.device, True, dict(cell.config), graph_pass),
    ):
        args = inputs.make_inputs(cell.shape, cell.dtype, cell.device, cell.seed)
        _eager_first(variant, args, cell)  # the same state as the other processes (run_cold)
        with (
            capture.depyf_dump(os.path.join(capture_dir, "depyf")),
            diagnose.autotune_choices() as retuned,
        ):
            _compiled_first_call(cell, variant, args)
    if retuned:
        write_json(os.path.join(capture_dir, RETUNED), retuned)
    if graph_pass is not None:  # counted in a compile that really ran (FX caches off here)
        write_json(os.path.join(capture_dir, "passes.json"), graph_pass.stats)
    write_json(
        os.path.join(capture_dir, "graphs.json"),
        capture.read_trace(os.environ.get("TORCH_TRACE", "")),
    )


def run_measure(cell, stage_dir: str, cache_dir: str, result) -> None:
    """Warm compile, check, time, then profile and map, into `result` and stage_dir."""
    with _step(result, "imports"):  # torch, and the variant's module
        import torch

        from compilekit import envinfo, inputs, locks, modes, settings

        variant = cell_variant(cell)
    result.torch_version = torch.__version__
    if reason := modes.unsupported_reason(cell.mode, cell.device):
        raise CellEnded("unsupported", reason)
    with contextlib.ExitStack() as stack:
        if cell.mode != "eager":  # eager calls never read Inductor's config: spare its import
            with _step(result, "inductor_import_and_settings"):
                changes = stack.enter_context(
                    settings.toolkit_settings(
                        cell.device, False, dict(cell.config), _cell_pass(cell)
                    )
                )
            result.settings = {f"torch._inductor.config.{k}": v for k, v in changes.items()}
        # The GPU from here on, not before: the imports above are CPU work (they share the CPU
        # lock, so no timing overlaps them), and the GPU's current cell need not wait for them.
        stack.enter_context(locks.gpu_turn(result.steps_s))
        with _step(result, "device_init"):  # the first kernel: CUDA context, dtype support
            if reason := inputs.dtype_probe(cell.dtype, cell.device):
                raise CellEnded("unsupported", reason)
        with _step(result, "inputs"):
            args = inputs.make_inputs(cell.shape, cell.dtype, cell.device, cell.seed)
            eager_out, result.eager_note = _eager_first(variant, args, cell)
            if eager_out is not None:
                _checked(eager_out, args[0], "eager:", result)
        compiled = variant.attention
        if cell.mode != "eager":
            compiled = _warm_compile(cell, variant, args, cache_dir, result)
        with _step(result, "first_check"):
            out = compiled(*args)
            _checked(out, args[0], "compiled:", result)
            del out
        # Timed before the float64 reference and the error check, in the order a user's
        # process (and verify's bare child) runs: inputs, one eager call, compile, time.
        with _step(result, "time"), locks.cpu_alone(result.steps_s):
            _time(cell, variant, compiled, args, result)
        with _step(result, "reference_and_check"):
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
        _evidence(cell, compiled, args, stage_dir, cache_dir, result)
    result.env = envinfo.cell_env(cell.device)  # after the GPU work: it asks for the GPU's name


@contextlib.contextmanager
def _step(result, name: str):
    """Record how long one step took, in result.steps_s[name]."""
    start = time.perf_counter()
    try:
        yield
    finally:
        result.steps_s[name] = round(time.perf_counter() - start, 3)


def _warm_compile(cell, variant, args, cache_dir: str, result):
    """The first call of a fresh wrapper with the caches filled (the warm compile), with the
    CUDA-graph skip reasons torch logs meanwhile."""
    from compilekit import diagnose, modes
    from compilekit.store import read_json

    cold = read_json(os.path.join(cache_dir, "cold.json"))
    with _step(result, "compile_warm"), diagnose.cudagraph_skip_reasons() as skip_reasons:
        compiled, warm_s, _ = _compiled_first_call(cell, variant, args)
    if cell.device == "cpu":
        # Inductor's compile workers keep cores busy after the compile; on a 2-core machine
        # they would be timed along with the kernels.
        from torch._inductor import async_compile

        if hasattr(async_compile, "shutdown_compile_workers"):
            with _step(result, "compile_workers_stop"):
                async_compile.shutdown_compile_workers()
    from torch._dynamo.utils import counters

    if cell.passes:
        result.pass_stats = read_json(os.path.join(cache_dir, "capture", "passes.json"))
    result.autotune = cold.get("autotune") or None
    result.compile_cold_s = cold["compile_cold_s"]
    result.compile_cold_measured_at = cold["measured_at"]
    result.compile_warm_s = warm_s
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


def _time(cell, variant, compiled, args, result) -> None:
    """Steady state of eager and compiled (do_bench on CUDA), the host cost of one call, and on
    CUDA a user's loop of each (back-to-back calls: what host-bound judgements read). A
    disturbed attempt (see noise_note) is timed again after a pause, up to RETIMES times, and
    the quietest attempt (undisturbed, then the smallest spread) is kept: a short disturbance
    from another process on a shared host says nothing about the code. Every attempt's medians
    are kept in timing_attempts, with what else used the CPU meanwhile (cpuwatch)."""
    from compilekit import cpuwatch

    attempts = []
    with_eager = result.eager_note is None  # else eager ran out of memory: compiled alone
    for attempt in range(1 + RETIMES):
        if attempt:
            time.sleep(RETIME_PAUSE_S)
        with cpuwatch.watch() as watched:
            eager, steady, host, loops = _timed_calls(cell, variant, compiled, args, with_eager)
        load = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
        timed = [t for t in (eager, steady) if t]
        note = noise_note(timed, load, os.cpu_count() or 1, watched.use)
        attempts.append((spread(timed), eager, steady, host, loops, note, watched.use))
        if note is None:
            break
    # the quietest: an attempt with no noise note first, then the smallest spread
    quietest = min(attempts, key=lambda a: (a[5] is not None, a[0]))
    _, eager, steady, host, loops, note, use = quietest
    result.cpu_use = use.to_dict() if use else None
    if len(attempts) > 1:
        result.timing_attempts = [
            {"eager_ms": e and e["median_ms"], "compiled_ms": c["median_ms"], "spread": sp}
            | {"noise": n}
            | ({"cpu_use": u.to_dict()} if u else {})
            for sp, e, c, _, _, n, u in attempts
        ]
    result.compiled_ms, result.compiled_timing = steady["median_ms"], steady
    if eager:  # None where eager could not run: no eager figure, no speedup
        result.eager_ms, result.eager_timing = eager["median_ms"], eager
        result.speedup = eager["median_ms"] / steady["median_ms"]
    result.host_ms_per_call = host
    if loops:
        result.loop_timing = loops
        result.eager_loop_ms = loops["eager"]["median_ms"] if eager else None
        result.compiled_loop_ms = loops["compiled"]["median_ms"]
    if variant.flops is not None:
        result.flops = float(variant.flops(cell.shape))
        result.tflops = result.flops / (steady["median_ms"] * 1e-3) / 1e12
        if eager:
            result.eager_tflops = result.flops / (eager["median_ms"] * 1e-3) / 1e12
    result.noise_note = note
    result.noisy = note is not None


def _timed_calls(cell, variant, compiled, args, with_eager: bool):
    """(eager timing or None, compiled timing, host ms per call or None, {"compiled", "eager"}
    loops or None). The callable the cell is about first, in the order `compilekit verify`'s
    bare child times it (do_bench, a user's loop, the host's cost): the two processes then
    differ in what ran before, not in the order of the timed calls. Eager after it, where
    eager is only the comparison."""
    from compilekit import timing

    cuda = cell.device == "cuda"
    steady = timing.bench(compiled, args, cell.device)  # in eager mode, the variant itself
    host, loops = None, None
    if cuda:
        loops = {"compiled": timing.loop_timing(compiled, args, steady["median_ms"])}
        loops["host"] = timing.host_loops(compiled, args, timing.host_calls(steady["median_ms"]))
        host = loops["host"]["median_ms"]
    if cell.mode == "eager":
        return steady, steady, host, loops and {**loops, "eager": loops["compiled"]}
    eager = timing.bench(variant.attention, args, cell.device) if with_eager else None
    if cuda and eager:
        loops["eager"] = timing.loop_timing(variant.attention, args, eager["median_ms"])
    return eager, steady, host, loops


def busy_share(device_ms: float, loop_ms: float) -> tuple[float, bool]:
    """(the share of each call the GPU is busy, host-bound?) from the device time per forward
    and a user's loop's time per call. Not do_bench's figure: its L2 flush gives the host a
    head start that hides up to the flush's GPU time of host cost per call."""
    share = min(1.0, device_ms / loop_ms)
    return share, share < HOST_BOUND_SHARE


def spread(timings: list[dict]) -> float:
    """The widest p90 / fastest-sample ratio among these timings (1.0: no spread)."""
    return max(t["p90_ms"] / t["min_ms"] if t["min_ms"] else 1.0 for t in timings)


def noise_note(timings: list[dict], load: float, cores: int, use=None) -> str | None:
    """Why these timings may be disturbed (a wide spread, a loaded machine, other processes or
    the hypervisor busy on our cores meanwhile: `use`, a cpuwatch.CpuUse); None if clean. A
    wide spread also says what else ran, when /proc could tell."""
    notes = []
    widest = spread(timings)
    if widest > NOISY_SPREAD:
        notes.append(f"p90 is {widest:.2f}x the fastest sample")
    if load > cores:
        notes.append(f"load average {load:.1f} on {cores} cores")
    busy_cores = max(BUSY_OTHERS_CORES, BUSY_OTHERS_SHARE * cores)
    busy = use is not None and max(use.others_cores, use.steal_cores) >= busy_cores
    if use is not None and (notes or busy):
        notes.append(f"meanwhile {use.text()}")
    return "; ".join(notes) or None


def _evidence(cell, compiled, args, stage_dir: str, cache_dir: str, result) -> None:
    """After the timed calls: peak memory, profile, kernel map, diagnostics."""
    import torch

    from compilekit.store import read_json, write_json

    if cell.device == "cuda":
        torch.cuda.reset_peak_memory_stats()
        compiled(*args)
        torch.cuda.synchronize()
        result.peak_memory_mb = torch.cuda.max_memory_allocated() / 2**20
    label = f"{cell.variant}/{cell.mode}"
    with _step(result, "profile"):  # the profiler's import included
        from compilekit import capture, diagnose, kernelmap, profiling

        prof = profiling.run_profiler(compiled, args, label, cell.device, stage_dir)
        itemsize = getattr(torch, cell.dtype).itemsize
        forward = profiling.forward_kernels(prof, label, cell.device, itemsize)
        eager_lines = definitions = None
        if cell.mode == "eager":
            eager_lines = profiling.eager_source_lines(compiled, args)
            definitions = profiling.raw_kernel_definitions()
        op_rows = profiling.op_table(prof, cell.device)
        write_json(os.path.join(stage_dir, "ops.json"), op_rows)
    with _step(result, "map"):
        graphs = {}
        capture_dir = os.path.join(cache_dir, "capture")
        if cell.mode != "eager":
            graphs = read_json(os.path.join(capture_dir, "graphs.json"))
            for name in ("depyf", "torch_trace"):  # the capture's evidence, kept with the run
                if os.path.isdir(os.path.join(capture_dir, name)):
                    shutil.copytree(os.path.join(capture_dir, name), os.path.join(stage_dir, name))
        # the two inputs of the map, kept so it can be read (and rebuilt) without a GPU
        write_json(os.path.join(stage_dir, "provenance.json"), graphs)
        write_json(os.path.join(stage_dir, "forward.json"), forward)
        kernel_files = capture.write_kernels(graphs, stage_dir)
        records = kernelmap.build_map(
            forward, graphs, kernel_files, stage_dir, cell.mode != "eager", eager_lines,
            definitions,
        )  # fmt: skip
    with _step(result, "roofline"):  # the ceilings are measured once per machine, then kept
        from compilekit import envinfo, roofline

        # q, k, v in and the output (q's size) out: the attention's least traffic
        io_bytes = sum(a.numel() * a.element_size() for a in (*args, args[0]))
        roofline.annotate(
            records,
            envinfo.device_ceilings(cell.device, os.path.dirname(cache_dir)),
            result.flops,
            io_bytes,
        )
        result.roofline = roofline.summary(records)
    write_json(
        os.path.join(stage_dir, "kernels.json"),
        {
            "forward_device_ms": forward["forward_device_ms"],
            "forward_host_ms": forward["forward_host_ms"],
            "kernels_per_forward": forward["kernels_per_forward"],
            # the dtypes behind each record's `bytes`: the profiler's, or the cell's assumed
            "bytes_dtypes": forward["bytes_dtypes"],
            "io_bytes": io_bytes,  # what roofline.annotate gives a raw attention kernel
            "kernels": records,
            "by_source_line": kernelmap.by_source_line(records),
        },
    )
    result.kernels_per_forward = forward["kernels_per_forward"]
    result.profiled_forward_device_ms = forward["forward_device_ms"]
    result.profiled_forward_host_ms = forward["forward_host_ms"]
    if cell.device == "cuda" and result.compiled_loop_ms:
        result.gpu_busy_share, result.host_bound = busy_share(
            forward["forward_device_ms"], result.compiled_loop_ms
        )
    result.sdpa_backend = diagnose.sdpa_backend(records, [row["name"] for row in op_rows])
    if cell.mode != "eager":
        result.dynamo = diagnose.dynamo_counters()
        result.attention_rewrite = diagnose.attention_rewrite(result.dynamo, records, cell.passes)
    if (result.cudagraphs or {}).get("applied"):
        result.replay = diagnose.replay_breakdown(
            records,
            result.host_ms_per_call,
            diagnose.cudagraph_tree_stats(torch.cuda.current_device()),
            result.dynamo["inductor"].get("cudagraph_recorded_non_static_inputs", 0),
        )
        result.replay["bytes_dtypes"] = forward["bytes_dtypes"]


def main(argv: list[str]) -> int:
    phase, cell_json, stage_dir, cache_dir, timeout_s = argv
    _die_with_parent_and_on_timeout(float(timeout_s), stage_dir)
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
            run_cold(cell, cache_dir, result.steps_s)
        elif phase == "capture":
            run_capture(cell, cache_dir, result.steps_s)
        else:
            run_measure(cell, stage_dir, cache_dir, result)
    except CellEnded as ended:
        _ended(result, ended)
    except Exception as exc:  # the toolkit's own failure, or the user's code in a new place
        traceback.print_exc()
        _ended(result, failure_outside_probe(cell, exc))
    if phase == "measure" or result.reason:  # measured, or the cell ended in this phase
        result.save(stage_dir)
    print(f"{phase} process: {time.perf_counter() - PROCESS_START:.1f} s", file=sys.stderr)
    return 0


def _ended(result, ended: CellEnded) -> None:
    """The record of a cell that ended early: its status and reason, and for a failure its kind
    (out_of_memory, which a sweep runs again alone; error otherwise) as a field."""
    result.status, result.reason = ended.status, ended.reason
    if ended.status == "failed":
        result.failure = "out_of_memory" if ended.out_of_memory else "error"


def _exit_now(code: int) -> None:
    """End the cell process without the interpreter's teardown (torch's and Inductor's exit
    handlers, module cleanup, the CUDA context), which took about 1 s per process on a 2-core
    CPU, for nothing: every file is written and closed by now. What teardown would still have
    done that matters is done here: stop Inductor's compile workers, flush logs and streams."""
    if "torch._inductor.async_compile" in sys.modules:
        from torch._inductor import async_compile

        if hasattr(async_compile, "shutdown_compile_workers"):
            async_compile.shutdown_compile_workers()
    import logging

    logging.shutdown()  # TORCH_TRACE and other file handlers
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    _exit_now(main(sys.argv[1:]))
