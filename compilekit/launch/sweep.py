"""A whole experiment: every cell in its own subprocess, resumable, one cell per GPU at a time.

Cells already in the output directory are kept unless forced; a cell that fails or cannot run
records why and the sweep goes on, whatever went wrong (in the cell, or in launching or
collecting it); each cell's run directory appears atomically, so an interrupted sweep loses at
most the cells in flight. One sweep at a time writes into an output directory.
"""

from __future__ import annotations

import collections
import os
import sys
import tempfile
import threading
import time

from compilekit.launch import cache, runner
from compilekit.launch.sweeprecord import summary, write_sweep_json
from compilekit.measure import locks
from compilekit.model import kernelfile
from compilekit.model import result as results
from compilekit.model.errors import UserError
from compilekit.model.experiment import Experiment
from compilekit.model.store import Busy, CorruptFile, exclusive_lock, kept

# what each --retry-KIND asks to run again
RETRY = {
    "failed": "re-run cells that failed",
    "noisy": "time again the cells whose timing was disturbed (noisy); their compiles are kept",
    "changed": "re-run cells not measured with this checkout's code of their variant and "
    "passes (or with no record of it)",
}
# At most this many max-autotune cells run on one GPU at once: every benchmark they run to
# choose a kernel holds the GPU alone, so more of them only queue for it (docs/sweeps.md has
# the waits measured). A GPU's other cell processes take the other cells meanwhile.
AUTOTUNE_PER_GPU = 4


def _autotunes(cell) -> bool:
    return cell.mode.startswith("max-autotune")


def longest_first(cells) -> list:
    """The cells in the order to start them: max-autotune's first (their cold compiles take
    longest, so the other cells fill that time instead of a sweep's tail), the rest as given."""
    return sorted(cells, key=lambda c: not _autotunes(c))


class Todo:
    """The cells left to run, handed to the sweep's workers longest_first, with at most
    AUTOTUNE_PER_GPU max-autotune cells running on a GPU at once, a cell whose matrix sets
    per_gpu (limits: label -> N) started only where its GPU then runs fewer than N cells and
    runs none whose own N that would reach, and a CPU cell (its kernels use every core) only
    where no other cell runs, with none started beside it."""

    def __init__(self, cells, limits: dict | None = None):
        self._cells = longest_first(cells)
        self._limits = limits or {}
        self._autotuning = collections.Counter()  # gpu -> its max-autotune cells running
        self._running = collections.defaultdict(list)  # gpu -> its running cells' limits
        self._cpu_cell = False  # a CPU cell runs
        self._changed = threading.Condition()

    def __len__(self) -> int:
        return len(self._cells)

    def _fits(self, cell, gpu) -> bool:
        if gpu is None:  # a CPU sweep: one worker
            return True
        if self._cpu_cell or cell.device == "cpu" and any(self._running.values()):
            return False
        if _autotunes(cell) and self._autotuning[gpu] >= AUTOTUNE_PER_GPU:
            return False
        running = self._running[gpu]
        limits = [n for n in running + [self._limits.get(cell.label())] if n]
        return not limits or len(running) < min(limits)

    def take(self, gpu):
        """The next cell for a worker of `gpu` (None: any device), or None when none is left;
        waits while no cell left may start on `gpu` beside those it runs."""
        with self._changed:
            while self._cells:
                for i, cell in enumerate(self._cells):
                    if self._fits(cell, gpu):
                        self._autotuning[gpu] += _autotunes(cell)
                        self._running[gpu].append(self._limits.get(cell.label()))
                        if gpu is not None and cell.device == "cpu":
                            self._cpu_cell = True
                        return self._cells.pop(i)
                self._changed.wait()
            return None

    def finished(self, cell, gpu) -> None:
        """`cell`, taken for `gpu`, has ended (whatever its result)."""
        with self._changed:
            self._autotuning[gpu] -= _autotunes(cell)  # take() counted it, whatever the gpu
            self._running[gpu].remove(self._limits.get(cell.label()))
            if cell.device == "cpu":
                self._cpu_cell = False
            self._changed.notify_all()


def cell_done(run_dir: str, retry=(), log=None) -> results.CellResult | None:
    """The stored result of a finished cell, or None if it must (re)run: no result, an
    unreadable one (said in one line), a measured one whose kernel map is missing or of the
    wrong shape, a failure
    when `retry` holds "failed", a disturbed timing when it holds "noisy"."""
    log = log or sys.stdout  # the stdout of the call, not of the import
    if not os.path.isdir(run_dir):
        return None
    try:
        result = results.load(run_dir)
    except CorruptFile as exc:
        print(f"  {exc}; running the cell again", file=log, flush=True)
        return None
    kmap = os.path.join(run_dir, "kernels.json")
    if result.measured and not os.path.isfile(kept(kmap)):
        print(f"  {run_dir}: kernels.json is missing; running the cell again", file=log)
        return None
    try:  # of the wrong shape, every command that reads it would call it corrupt
        if result.measured:
            kernelfile.load(kmap)
    except CorruptFile as exc:
        print(f"  {exc}; running the cell again", file=log, flush=True)
        return None
    if "failed" in retry and result.status == "failed":
        return None
    if "noisy" in retry and result.noisy:
        print(f"  {run_dir}: noisy timing ({result.noise_note}); timing it again", file=log)
        return None
    return result


def _status(result: results.CellResult) -> str:
    """The cell's status for a progress line, with the latency when measured."""
    if result.measured:  # timed: compiled_ms is a number
        return f"{result.status} {result.compiled_ms:.3f} ms" + (
            " (noisy)" if result.noisy else ""
        )
    return result.status.upper() if result.status == "failed" else result.status


def failed_result(cell, reason: str, failure: str = "error") -> results.CellResult:
    """A launch that raised instead of returning (or, failure "crash", a Ray task whose worker
    died): recorded like any failed cell."""
    return results.for_cell(cell, status="failed", reason=reason, failure=failure)


def launch_or_record(cell, out_dir: str, **launch_args) -> results.CellResult:
    """runner.launch, with whatever it raises recorded as this cell's failure (the sweep, local
    or on Ray, goes on)."""
    try:
        return runner.launch(cell, out_dir, **launch_args)
    except UserError as exc:
        return failed_result(cell, str(exc))
    except Exception as exc:  # noqa: BLE001 (a full disk, a path too long: this cell only)
        return failed_result(
            cell, f"compilekit could not run this cell: {type(exc).__name__}: {exc}"
        )


def select_cells(experiment, out_dir: str, force: bool, retry, log):
    """({label: stored result} of the cells already done, [cells to run]), after removing what
    a killed sweep left half-done; sweep.json says what is stored so far."""
    runner.clean_stale(out_dir)
    done, todo, moved, code = {}, [], [], {}
    for cell in experiment.cells:
        run_dir = os.path.join(out_dir, cell.label())
        stored = None if force else cell_done(run_dir, retry, log)
        if stored is not None and (why := cache.code_moved(cell, stored.code_sources, code)):
            if "changed" in retry:
                print(f"  {run_dir}: {why}; running it again", file=log, flush=True)
                stored = None
            else:
                moved.append(cell.label())
        if stored is not None:
            done[cell.label()] = stored
        else:
            todo.append(cell)
    if moved:
        print(f"  {len(moved)} cells kept were not measured with this checkout's code (e.g. "
              f"{moved[0]}): --retry-changed runs them again", file=log, flush=True)  # fmt: skip
    write_sweep_json(experiment, list(done.values()), out_dir, None, None, log)  # cells' order
    return done, todo


def progress_line(
    position: int, total: int, cell, result, failed: int, left_s: float, extra: str = ""
) -> str:
    """`[n/N] variant mode shape dtype: status  (k failed or wrong, ~m min left)` and `extra`,
    then the reason on a second line when the cell did not pass."""
    line = (
        f"[{position}/{total}] {cell.variant} {cell.mode} {cell.shape} {cell.dtype}: "
        f"{_status(result)}  ({failed} failed or wrong, ~{left_s / 60:.1f} min left){extra}"
    )
    if result.reason and result.status != "ok":
        line += f"\n    reason: {result.reason.splitlines()[0][:300]}"
    return line


def run_sweep(
    experiment: Experiment,
    out_dir: str,
    gpus: list[str] | None = None,
    force: bool = False,
    retry=(),
    cache_root: str | None = None,
    fresh: bool = False,
    per_gpu: int = 4,
    log=None,
) -> list[results.CellResult]:
    """Run every missing cell of the experiment into out_dir; returns every cell's result.

    gpus: CUDA device indices to spread cells over; None or [] runs one cell at a time on the
    default device. Each GPU gets `per_gpu` cell processes at once; they take turns on the GPU,
    and each GPU's timed calls get a core of their own (compilekit/measure/locks.py), so every
    timing has both to itself; a machine with too few cores for that runs one cell at a time.
    A second sweep into the same out_dir is refused (UserError naming the holder's PID).
    """
    log = log or sys.stdout  # the stdout of the call, not of the import
    if per_gpu < 1:
        raise UserError(f"--per-gpu must be at least 1, not {per_gpu}")
    os.makedirs(out_dir, exist_ok=True)
    try:
        with exclusive_lock(os.path.join(out_dir, ".compilekit-sweep.lock")):
            return _run_locked(
                experiment, out_dir, gpus, force, retry, cache_root, fresh, per_gpu, log
            )
    except Busy as busy:
        raise UserError(
            f"another compilekit sweep (PID {busy.pid}) is writing into {out_dir!r}: wait for "
            "it, or choose another OUT"
        ) from None


def _run_locked(experiment, out_dir, gpus, force, retry, cache_root, fresh, per_gpu, log):
    done, cells = select_cells(experiment, out_dir, force, retry, log)
    todo = Todo(cells, experiment.per_gpu)
    total, pending = len(experiment.cells), len(todo)
    print(
        f"{experiment.name}: {total} cells, {total - pending} already done, {pending} to run"
        + (f" on GPUs {','.join(gpus)}" if gpus else ""),
        file=log,
        flush=True,
    )
    lock, start = threading.Lock(), time.perf_counter()
    finished = 0
    workers = [gpu for gpu in gpus for _ in range(per_gpu)] if gpus else [None]
    cores = locks.core_plan(gpus) if len(workers) > 1 else None
    if len(workers) > 1 and cores is None:  # a timing beside other cells' compiles
        print(
            f"{len(os.sched_getaffinity(0))} CPUs are too few to give each of {len(gpus)} GPU(s) "
            "a core of its own for its timed calls: one cell at a time",
            file=log,
            flush=True,
        )
        workers = workers[:1]

    def launch(cell, gpu) -> results.CellResult:
        env = {}
        if gpu is not None:
            if cell.device == "cuda":  # a CPU cell runs alone, on every core
                env.update((cores or {}).get(gpu, {}))
            env["CUDA_VISIBLE_DEVICES"] = gpu
            env["COMPILEKIT_GPU_LOCK"] = os.path.join(
                tempfile.gettempdir(), f"compilekit-gpu{gpu}.lock"
            )
        return launch_or_record(
            cell,
            out_dir,
            cache_root=cache_root,
            fresh=fresh,
            timeout_s=experiment.timeout_s.get(cell.label(), 900),
            env=env,
        )

    def work(gpu):
        nonlocal finished
        while (cell := todo.take(gpu)) is not None:
            try:
                result = launch(cell, gpu)
            finally:
                todo.finished(cell, gpu)
            with lock:
                done[cell.label()] = result
                finished += 1
                failed = sum(1 for r in done.values() if r.status in ("failed", "wrong"))
                left_s = (pending - finished) * (time.perf_counter() - start) / finished
                position = total - pending + finished
                print(
                    progress_line(position, total, cell, result, failed, left_s),
                    file=log,
                    flush=True,
                )

    threads = [threading.Thread(target=work, args=(gpu,), daemon=True) for gpu in workers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if len(workers) > 1:  # cells timed or run out of memory beside others: once more, alone
        run_again_alone(
            experiment.name, cells, done, out_dir, lambda cell: launch(cell, workers[0]), log
        )
    for cell in experiment.cells:  # a worker that died is a bug; its cells still get a record
        if cell.label() not in done:
            done[cell.label()] = failed_result(
                cell, "the sweep never ran this cell (worker ended)"
            )
    ordered = [done[c.label()] for c in experiment.cells]
    summary(experiment, ordered, out_dir, gpus, time.perf_counter() - start, log)
    return ordered


def out_of_memory(result) -> bool:
    """A cell that failed for want of memory (which, in a sweep, other cells may have held):
    its record says so (failure "out_of_memory")."""
    return result.status == "failed" and result.failure == "out_of_memory"


def run_again_alone(name: str, cells, done: dict, out_dir: str, launch, log) -> None:
    """Run each of these cells whose timing was noisy, or which ran out of memory, once more, one
    at a time, with no other cell process left in the sweep; runner.place keeps the quieter
    timing (or the run that did not fail) in place and the other in attempts/. done[label]
    becomes the result in place."""
    again = [c for c in cells if c.label() in done]
    noisy = [c for c in again if done[c.label()].noisy]
    short = [c for c in again if out_of_memory(done[c.label()])]
    if noisy:
        print(
            f"{name}: {len(noisy)} noisy timing(s): each timed again, alone", file=log, flush=True
        )
    if short:
        print(
            f"{name}: {len(short)} cell(s) out of memory beside other cell processes: each run "
            "again, alone",
            file=log,
            flush=True,
        )
    for cell in noisy + short:
        before = done[cell.label()]
        after = launch(cell)
        try:
            kept = results.load(os.path.join(out_dir, cell.label()))
        except (OSError, CorruptFile):
            kept = after
        done[cell.label()] = kept
        first = _status(before) if before.noisy else "out of memory"
        print(
            f"  {cell.variant} {cell.mode} {cell.shape}: {first}, "
            f"again {_status(after)}; kept {_status(kept)}",
            file=log,
            flush=True,
        )
