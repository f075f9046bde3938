"""The parent side of one cell: its cache folder and key, the processes it starts, their kill
and timeout, and the run directory that appears (or the good one that stays) at the end.

A compiled cell's first run starts two processes (compilekit/launch/cell.py says what each
does), together so their imports overlap: `cold` (the honest cold compile, then the dump and
provenance) and `measure`, which waits for it (_beside_measure). Under max-autotune `cold`
runs alone, then `capture` beside `measure`, which waits for that one (in a sweep whose timed
calls have a core of their own, only before its kernel map: coldphase.capture_beside). Later
runs start only `measure`, which reuses the cold figure and the capture kept with the cache. An
eager cell runs `measure` alone. Each process runs in its own session (a timeout ends its
compile workers too), dies with its parent and enforces its own timeout.
"""

from __future__ import annotations

import datetime
import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import time

from compilekit import ROOT
from compilekit.launch import cache, coldphase, reaper
from compilekit.launch import cell as cell_process
from compilekit.measure import fits, locks
from compilekit.model import result as results
from compilekit.model.errors import UserError
from compilekit.model.spec import check_timeout
from compilekit.model.store import (
    Busy,
    CorruptFile,
    cap_log,
    check_writable,
    exclusive_lock,
    write_json,
)

# Cell processes this process started and has not yet seen end (for Ctrl-C).
_RUNNING: set = set()
# The environment each process of a cell gets, beyond the caller's (see compile/settings.py
# for what is set inside torch). TORCHINDUCTOR_CACHE_DIR is the cell's own cache everywhere;
# COMPILEKIT_ISA_PROBES the folder of CPU ISA probes all cells share (settings.shared_isa_probes).
PHASE_ENV = {
    "cold": {},
    "capture": {},
    # warm: every kernel comes from the cache, so a pool of compile workers would only cost
    # its start-up (seconds, and CPU taken from the timed calls)
    "measure": {"TORCHINDUCTOR_COMPILE_THREADS": "1"},
}


def _kill(proc) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def stop_running() -> None:
    """End every cell process still running (the CLI calls this on Ctrl-C)."""
    for proc in list(_RUNNING):
        _kill(proc)


def _spawn(phase, cell, stage_dir, cache_dir, timeout_s, env, log) -> int | str:
    """Run one phase process of the cell; its exit code, or "timeout"."""
    return _finish(_start(phase, cell, stage_dir, cache_dir, timeout_s, env, log), timeout_s, log)


def _start(phase, cell, stage_dir, cache_dir, timeout_s, env, log, pass_fds=()):
    """Start one phase process of the cell (Popen), in its own session, marked as the cell's."""
    child_env = {
        **os.environ,
        **(env or {}),
        **PHASE_ENV[phase],
        **cache.inductor_env(cache_dir),
        "PYTHONUNBUFFERED": "1",
        reaper.MARK: str(os.getpid()),  # dies with it; what it leaves, reaper.py ends
        "COMPILEKIT_SPAWNED_AT": repr(time.time()),
    }
    child_env.pop("TORCH_TRACE", None)  # the capture traces, after the cold figure is taken
    if cell.alloc:  # read when CUDA starts: the environment is the one place to set it
        child_env["PYTORCH_CUDA_ALLOC_CONF"] = cell.alloc
    child_env["PYTHONPATH"] = os.pathsep.join(filter(None, [ROOT, child_env.get("PYTHONPATH")]))
    cmd = [sys.executable, "-m", "compilekit.launch.cell", phase, json.dumps(cell.to_dict()),
           stage_dir, cache_dir, str(timeout_s)]  # fmt: skip
    print(f"--- compilekit: {phase} process ---", file=log, flush=True)
    reaper.become_subreaper()  # a helper the cell starts in a session of its own comes here
    with reaper.LOCK:
        proc = subprocess.Popen(
            cmd,
            env=child_env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            pass_fds=pass_fds,
        )
        _RUNNING.add(proc)
    locks.keep_off_quiet_cores(proc.pid, child_env)
    return proc


def _finish(proc, timeout_s: float, log) -> int | str:
    """Wait for a phase process; its exit code, or "timeout" (then it is killed). What it left
    running is ended either way."""
    try:
        # the child ends itself at timeout_s; this is the backstop
        return proc.wait(timeout=timeout_s + 15)
    except subprocess.TimeoutExpired:
        _kill(proc)
        return "timeout"
    finally:
        _RUNNING.discard(proc)
        ended = reaper.end_leftovers(proc.pid, lambda: {p.pid for p in list(_RUNNING)})
        if ended:
            print(f"compilekit: ended {ended} process(es) the cell left running", file=log)


def _beside_measure(first, cell, stage_dir, cache_dir, timeout_s, env, log, walls):
    """The last process before measure (`first`: cold, or max-autotune's capture) and the
    measure process of a first run, started together so their imports overlap (seconds each);
    the cold compile waits for the measure process's imports, and the measure process for
    `first`'s end, so neither figure has the other beside it (coldphase.
    wait_for_measure_imports, coldphase.wait_for_cold). Returns the exit codes (first,
    measure); measure's is None where `first` ended the cell."""
    from compilekit.model.store import open_lock

    start = time.perf_counter()
    # Held by `first` from birth to death, and here until what it left running (its compile
    # workers, still starting up) is ended: the measure process waits for it.
    held = open_lock(os.path.join(cache_dir, coldphase.COLD_LOCK))
    fcntl.flock(held, fcntl.LOCK_EX)
    try:
        beside = {**(env or {}), coldphase.BESIDE_ENV: "1"}
        before = _start(first, cell, stage_dir, cache_dir, timeout_s, beside, log, (held,))
    except BaseException:
        os.close(held)
        raise
    measure_log = open(os.path.join(stage_dir, "log.measure.txt"), "w")
    measure = _start("measure", cell, stage_dir, cache_dir, 2 * timeout_s, beside, measure_log)
    imported = os.path.join(cache_dir, coldphase.IMPORTED)
    while before.poll() is None and time.perf_counter() - start < timeout_s + 15:
        if measure.poll() is not None and not os.path.exists(imported):
            open(imported, "w").close()  # it died: the cold compile need not wait for it
        time.sleep(0.05)
    before_code = _finish(before, max(0.0, timeout_s + 15 - (time.perf_counter() - start)), log)
    os.close(held)
    walls[f"{first}_process"] = round(time.perf_counter() - start, 3)
    ended = before_code != 0 or os.path.exists(os.path.join(stage_dir, "result.json"))
    if ended:
        _kill(measure)
    measure_code = _finish(measure, 2 * timeout_s, measure_log)
    walls["measure_process"] = round(time.perf_counter() - start, 3)
    measure_log.close()
    with open(measure_log.name, errors="replace") as f:
        log.write(f.read())  # one log, each process's lines together
    os.remove(measure_log.name)
    return before_code, None if ended else measure_code


def _after_pair(first, cell, codes, timeout_s: float, stage_dir: str, log):
    """The record of a pair (`first`, measure): the measure process's, or how one of them
    ended."""
    log.flush()
    first_code, measure_code = codes
    if os.path.exists(os.path.join(stage_dir, "result.json")):
        return results.load(stage_dir)  # measured, or ended in `first`
    if first_code != 0:
        return _died(cell, first, first_code, timeout_s, stage_dir)
    return _died(cell, "measure", measure_code, 2 * timeout_s, stage_dir)


def _died(cell, phase: str, code, timeout_s: float, stage_dir: str):
    """The failed record of a process that ended without a word: its exit code or signal (or
    the timeout: the parent's backstop, or the TIMED_OUT the process left) and the last lines
    of its log."""
    with open(os.path.join(stage_dir, "log.txt"), errors="replace") as f:
        lines = [ln for ln in f.read().splitlines() if ln.strip()]
    marker = os.path.join(stage_dir, reaper.TIMED_OUT)
    timed_out = code == "timeout" or os.path.exists(marker)
    if os.path.exists(marker):
        os.remove(marker)
    if timed_out:
        why = f"timed out after {timeout_s:g} s"
    elif isinstance(code, int) and code < 0:
        why = f"killed by {signal.Signals(-code).name}"
        if code == -signal.SIGKILL:  # not by compilekit: it kills on a timeout, said above
            have, where = fits.capacity("cpu")
            size = f"; {where} has {have / fits.GIB:.1f} GiB" if have else ""
            why += f", most often the kernel's out-of-memory killer{size}"
    else:
        why = f"exit code {code}"
    tail = " | ".join(ln.strip() for ln in lines[-4:] if not ln.startswith("--- compilekit"))
    return results.for_cell(
        cell,
        status="failed",
        reason=f"{phase} process died ({why}); last lines of log.txt: {tail[-600:] or '(empty)'}",
        exit_code=code,
        failure="timeout" if timed_out else "crash",
    )


def launch(
    cell,
    out_dir: str,
    cache_root: str | None = None,
    fresh: bool = False,
    timeout_s: float = 1800,
    env: dict | None = None,
) -> results.CellResult:
    """Measure one cell in fresh processes and put its run directory under out_dir.

    Returns the CellResult (with run_dir set). A crash, a timeout or a CUDA error stays in its
    process: the result records it and the caller goes on. A failed attempt never replaces a
    good run directory, nor a noisy timing a quiet one: it is kept in <run_dir>/attempts/
    instead (see place). Raises UserError for what the user must fix first (bad timeout,
    unwritable or full directories, the same cell already being measured by another process).
    """
    check_timeout(timeout_s)
    cache_root = cache_root or cache.default_root()
    check_writable(out_dir, "output directory", "choose another with OUT=dir (--out)")
    check_writable(cache_root, "compile cache", "set COMPILEKIT_CACHE to a writable directory")
    key = cache.key_of(cell)  # once: it hashes the variant's import closure
    cache_dir = cache.folder(cell, cache_root, key)
    try:
        with exclusive_lock(cache_dir + ".lock"):
            return _launch_locked(cell, out_dir, cache_dir, key, fresh, timeout_s, env)
    except Busy as busy:
        raise UserError(
            f"cell {cell.label()} is being measured by another compilekit process (PID "
            f"{busy.pid}): wait for it to finish, then run again"
        ) from None


def _launch_locked(cell, out_dir, cache_dir, key, fresh, timeout_s, env) -> results.CellResult:
    start = time.perf_counter()
    run_dir = os.path.join(out_dir, cell.label())
    clean_stale(out_dir, cell.label())  # what an interrupted run of this cell left
    stage_dir = f"{run_dir}.tmp-{os.getpid()}"
    shutil.rmtree(stage_dir, ignore_errors=True)
    os.makedirs(stage_dir)
    log_path = os.path.join(stage_dir, "log.txt")
    compiles = cell.mode != "eager"
    rebuild, cache_note = cache.state(key, cache_dir, fresh) if compiles else (False, None)
    phases = ["measure"]
    if rebuild:
        # an interrupted or stale cache would make the next "cold" compile partly warm
        shutil.rmtree(cache_dir, ignore_errors=True)
        os.makedirs(os.path.join(cache_dir, "capture"))
        write_json(os.path.join(cache_dir, "key.json"), key)
        phases = ["cold", "measure"]
        if coldphase.separate_capture(cell):
            phases.insert(1, "capture")
    result, walls = None, {}
    with open(log_path, "w") as log:
        if cache_note:
            print(f"compilekit: {cache_note}", file=log, flush=True)
        # a first run: the phases before the last one alone, the last one beside measure
        one_by_one, paired = (phases[:-2], phases[-2]) if rebuild else (phases, None)
        for phase in one_by_one:
            phase_start = time.perf_counter()
            code = _spawn(phase, cell, stage_dir, cache_dir, timeout_s, env, log)
            walls[f"{phase}_process"] = round(time.perf_counter() - phase_start, 3)
            if os.path.exists(os.path.join(stage_dir, "result.json")):
                result = results.load(stage_dir)  # measured, or ended in this phase
                break
            if code != 0 or phase == "measure":
                result = _died(cell, phase, code, timeout_s, stage_dir)
                break
        if result is None and paired:
            codes = _beside_measure(paired, cell, stage_dir, cache_dir, timeout_s, env, log, walls)
            result = _after_pair(paired, cell, codes, timeout_s, stage_dir, log)
    if result.status == "failed" and rebuild:
        shutil.rmtree(cache_dir, ignore_errors=True)  # never reuse a half-built cache
    if cache_note:
        result.compile_notes = {**(result.compile_notes or {}), "cache": cache_note}
    if rebuild and result.measured:
        notes = cell_process.PROCESS_NOTES
        result.processes = {p: notes[p] for p in phases[:-1]} | result.processes
    result.steps_s = {**result.steps_s, **walls}  # each process's wall, as the parent saw it
    result.wall_s = time.perf_counter() - start
    result.code_sources = {"variant": key["variant_sources"], "passes": key["pass_sources"]}
    cap_log(log_path)
    return place(result, stage_dir, run_dir)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def clean_stale(out_dir: str, label: str | None = None) -> None:
    """Remove what a killed run or sweep left half-done (of one cell, given its label):
    staging directories (`<cell>.tmp-<pid>`) of processes that are gone; a replaced result
    (`<cell>.old-<pid>`) goes back into place if its successor never arrived."""
    import re

    for name in os.listdir(out_dir):
        m = re.match(r"^(.*)\.(tmp|old)-(\d+)$", name)
        if not m or (label is not None and m[1] != label) or _alive(int(m[3])):
            continue
        path, final = os.path.join(out_dir, name), os.path.join(out_dir, m[1])
        if m[2] == "old" and not os.path.exists(final):
            os.replace(path, final)
        else:
            shutil.rmtree(path, ignore_errors=True)


def _worse(new, previous) -> bool:
    """Whether a rerun should not replace the run already in place: it failed beside a run that
    did not, or its timing was disturbed beside an undisturbed one, both of the same code."""
    if previous.status == "failed" or _other_code(new, previous):
        return False
    return new.status == "failed" or (new.noisy and previous.measured and not previous.noisy)


def _other_code(new, previous) -> bool:
    """Whether the two runs measured different sources of the variant or of its passes (their
    code_sources): a quiet or working run of other code says nothing of this code, so the
    rerun takes its place, failed or noisy, and it is kept in attempts/."""
    return new.code_sources != previous.code_sources


OTHER_CODE = "measured before the variant's or its passes' sources changed"


def _attempt_entry(r, where: str, other_code: bool = False) -> dict:
    """What a result's attempts list says of a run kept in `where` (failed, noisy or of other
    code)."""
    if other_code:
        return {"dir": where, "status": "other code", "reason": OTHER_CODE,
                "compiled_ms": r.compiled_ms}  # fmt: skip
    if r.status == "failed":
        return {"dir": where, "status": "failed", "reason": r.reason}
    return {"dir": where, "status": "noisy", "reason": r.noise_note, "compiled_ms": r.compiled_ms}


def place(result, stage_dir: str, run_dir: str) -> results.CellResult:
    """Move the staged run into place, keeping the other run in <run_dir>/attempts/<time>/ (and
    listed in the kept result's attempts) when one of the two is worse: a failed rerun, or a
    noisy timing, beside a good or quiet run of the same code leaves that run in place; a run
    that replaces a noisy timing, or a run of other code, keeps it as evidence."""
    previous = None
    if os.path.isdir(run_dir):
        try:
            previous = results.load(run_dir)
        except CorruptFile:
            previous = None
    where = os.path.join("attempts", datetime.datetime.now().strftime("%Y%m%d-%H%M%S-%f"))
    where += f"-{os.getpid()}"
    if previous is not None and _worse(result, previous):
        attempt = os.path.join(run_dir, where)
        result.save(stage_dir)
        os.makedirs(os.path.dirname(attempt), exist_ok=True)
        os.replace(stage_dir, attempt)
        previous.attempts = previous.attempts + [_attempt_entry(result, where)]
        previous.save(run_dir)
        previous.run_dir = run_dir
        result.run_dir = attempt
        return result
    other = previous is not None and _other_code(result, previous)
    keep_previous = previous is not None and (other or (previous.noisy and result.measured))
    if keep_previous:  # the disturbed timing, or other code's run, this run replaces
        nested = [a | {"dir": os.path.join(where, a["dir"])} for a in previous.attempts]
        result.attempts = result.attempts + nested + [_attempt_entry(previous, where, other)]
    result.save(stage_dir)
    old = f"{run_dir}.old-{os.getpid()}"
    if os.path.exists(run_dir):
        os.replace(run_dir, old)
    if keep_previous:
        os.makedirs(os.path.join(stage_dir, "attempts"), exist_ok=True)
        os.replace(old, os.path.join(stage_dir, where))
    os.replace(stage_dir, run_dir)
    shutil.rmtree(old, ignore_errors=True)
    result.run_dir = run_dir
    return result
