"""`compilekit verify RUN`: re-time a run's callable in fresh processes with nothing but
`triton.testing.do_bench` (GPU) or a bare perf_counter loop (CPU), and compare.

The child (compilekit/verify/bare.py) times the cell's callable with no profiler, capture, lock
or toolkit timing code. Its median against the run's figure says whether the toolkit measured
the code or itself.

A device-paced run is judged by its do_bench median (CPU: perf_counter). A host-bound run is
judged by a user's loop (back-to-back calls between two events), whose median the child takes
with as many calls per loop: do_bench's L2 flush gives the host a head start that hides the
host's cost. Such a figure follows the host's CPU, so where the bare processes disagree among
themselves the verdict is INCONCLUSIVE and says so: that is an honest answer.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from compilekit.verify.bare import LOOP_REPEATS, median


def verify(
    run_dir: str, tolerance: float = 0.05, cache_root: str | None = None, repeat: int = 3
) -> tuple[str, str]:
    """(the report: a verdict line, then at most four indented lines; the verdict): "within"
    when the run's figure is within `tolerance` of the median of `repeat` bare re-times in
    fresh processes, "outside" when it is not, "inconclusive" when the bare processes
    themselves spread wider than `tolerance`. Every bare figure goes to RUN/verify.json."""
    from compilekit.launch import cache
    from compilekit.model.errors import UserError

    if repeat < 1:
        raise UserError(f"--repeat must be at least 1, not {repeat}")
    result, cell = _measured_cell(run_dir)
    by_loop = result.paced_by_loop  # host-bound: a user's loop, not do_bench, is its cost
    key = "loop_ms" if by_loop else "median_ms"
    toolkit = result.compiled_loop_ms if by_loop else result.compiled_ms
    calls = result.loop_timing["compiled"]["calls"] if by_loop else 0
    env = _bare_env(cell, cache_root or cache.default_root())
    runs = [_bare_once(cell, env, calls) for _ in range(repeat)]
    bares = sorted(run[key] for run in runs)
    bare, ratio, verdict = _judged(toolkit, bares, tolerance)
    method = f"a loop of {calls} calls" if by_loop else _bare_method(cell.device)
    head = {
        "within": f"within {tolerance:.0%}",
        "outside": f"OUTSIDE {tolerance:.0%}",
        "inconclusive": "INCONCLUSIVE",
    }[verdict]
    lines = [
        f"{head}: {result.label}: toolkit {toolkit:.4f} ms, bare {bare:.4f} ms "
        f"({method}), ratio {ratio:.3f}"
    ]
    plural = "es" if repeat > 1 else ""
    lines.append(
        f"  {repeat} fresh bare process{plural}: "
        + (f"{bares[0]:.4f}-{bares[-1]:.4f} ms" if repeat > 1 else f"{bares[0]:.4f} ms")
        + _spread_note(bares, tolerance, verdict)
    )
    if by_loop:
        lines.append(
            f"  host-bound (GPU busy {result.gpu_busy_share:.0%}): judged by a user's loop, "
            "whose time follows the host's CPU"
        )
    lines.append(f"  every figure: {os.path.join(run_dir, 'verify.json')}")
    return _kept(run_dir, lines, verdict, tolerance, toolkit_ms=toolkit, key=key, bare=runs)


def _kept(run_dir: str, lines: list, verdict: str, tolerance: float, **data) -> tuple[str, str]:
    """(the report, the verdict), once the check's figures are appended to RUN/verify.json; a
    run directory that cannot be written keeps its verdict, and says so."""
    import datetime

    from compilekit.model.store import CorruptFile, read_json, write_json

    path = os.path.join(run_dir, "verify.json")
    entry = {
        "at": datetime.datetime.now().isoformat(timespec="seconds"),
        "tolerance": tolerance,
        "verdict": verdict,
        "report": lines,
        **data,
    }
    try:
        kept = read_json(path) if os.path.exists(path) else []
        kept = kept if isinstance(kept, list) else []
    except CorruptFile:  # an interrupted write of an older check: start the file again
        kept = []
    try:
        write_json(path, [*kept, entry])
    except OSError as exc:
        lines[-1] = f"  its figures not kept: {path}: {exc.strerror or exc}"
    return "\n".join(lines), verdict


def agreeing(bares: list[float], tolerance: float) -> int:
    """How many of the bare figures lie within `tolerance` of their median (itself included)."""
    middle = median(bares)
    return sum(1 for b in bares if abs(b / middle - 1) <= tolerance)


def _judged(toolkit: float, bares: list[float], tolerance: float) -> tuple[float, float, str]:
    """(the bare reference: the median of the sorted `bares`, toolkit over it, the verdict):
    "inconclusive" unless most bare processes agree (within `tolerance` of their median: one
    disturbed process of three leaves the median standing), else "within" or "outside" it."""
    bare = median(bares)
    ratio = toolkit / bare
    if 2 * agreeing(bares, tolerance) <= len(bares):
        return bare, ratio, "inconclusive"
    return bare, ratio, "within" if abs(ratio - 1) <= tolerance else "outside"


def _spread_note(bares: list[float], tolerance: float, verdict: str) -> str:
    """What the bare processes' spread means for the verdict, or nothing where they agree."""
    if verdict == "inconclusive":
        return (
            f", no majority within {tolerance:.0%} of their median: run again on a quiet machine"
        )
    apart = len(bares) - agreeing(bares, tolerance)
    if apart:
        return f"; {apart} more than {tolerance:.0%} from their median (disturbed), outvoted"
    return ""


def _bare_method(device: str) -> str:
    return "do_bench" if device == "cuda" else "perf_counter"


def _measured_cell(run_dir: str):
    """(the run's CellResult, its Cell); one line, exit 2, for a run that was not measured."""
    from compilekit.compile.variant import is_user_spec, source_file
    from compilekit.model.errors import UserError
    from compilekit.model.result import read_run
    from compilekit.model.spec import Cell

    result = read_run(run_dir)
    if not result.measured:
        raise UserError(f"{run_dir!r} was not measured ({result.status}): nothing to verify")
    if is_user_spec(result.variant) and not os.path.isfile(source_file(result.variant)):
        raise UserError(
            f"the run's variant file {source_file(result.variant)!r} is not here: verify "
            "re-runs it, so run verify where that file is"
        )
    return result, Cell.from_dict(result.to_dict())


def _bare_env(cell, cache_root: str) -> dict:
    """The bare child's environment: the cell's Inductor cache (and the shared ISA probes, as
    a user's cache holds them), no trace, one compile thread."""
    from compilekit import ROOT
    from compilekit.launch import cache

    env = {
        **os.environ,
        **cache.inductor_env(cache.folder(cell, cache_root)),
        "TORCHINDUCTOR_COMPILE_THREADS": "1",
        "PYTHONPATH": os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")])),
        **({"PYTORCH_CUDA_ALLOC_CONF": cell.alloc} if cell.alloc else {}),  # as the cell ran
    }
    env.pop("TORCH_TRACE", None)
    return env


def _bare_once(cell, env: dict, loop_calls: int = 0) -> dict:
    """One fresh process's bare figures (ms): {"median_ms"} (do_bench or perf_counter), and
    "loop_ms" (LOOP_REPEATS loops of loop_calls calls) when loop_calls is set (CUDA)."""
    from compilekit.model.errors import UserError

    command = [sys.executable, "-m", "compilekit.verify.bare", json.dumps(cell.to_dict()),
               str(loop_calls), str(LOOP_REPEATS)]  # fmt: skip
    proc = subprocess.run(command, env=env, capture_output=True, text=True, timeout=1800)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = " | ".join(proc.stderr.strip().splitlines()[-3:])
        raise UserError(f"the bare re-time failed (exit {proc.returncode}): {tail}")
    return json.loads(lines[-1])
