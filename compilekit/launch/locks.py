"""Taking turns between the cell processes of one sweep.

- The GPU: a readers-writer lock per GPU (COMPILEKIT_GPU_LOCK). GPU work that yields a figure
  holds it alone: the timed calls, the profile and kernel map, max-autotune's benchmarks of its
  candidates. GPU work that yields none shares it: the first kernels, the eager probe, a warm
  or cold compile's first call, the float64 reference. So no figure is read while another
  cell's kernels run, and cells wait for one another only for those. A turnstile, as for the
  CPU, keeps new sharers out while a figure waits.
- The CPU: a readers-writer lock over the whole sweep (COMPILEKIT_CPU_LOCK). Starting up and
  compiling hold it shared; the timed calls hold it alone, so no other cell process of the sweep
  imports, starts up or compiles while a host-bound cell is timed. A second lock file (the
  turnstile) keeps new readers out while a timer waits, so timers are never starved.
  The parent takes the shared lock before it starts a cell process and hands the descriptor
  down (COMPILEKIT_CPU_LOCK_FD), so even the child's imports run under it.

Lock order, to rule out deadlock: never wait for the GPU while holding the CPU lock.
Without the environment variables (a single `compilekit run`) every function here is a no-op.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time

from compilekit.model.store import open_lock

_shared_fd: int | None = None


def _turnstile(path: str) -> str:
    return path + ".turn"


def shared_fd(path: str) -> int:
    """Take the CPU lock shared (through the turnstile); returns the descriptor that holds it."""
    turn = open_lock(_turnstile(path))
    try:
        fcntl.flock(turn, fcntl.LOCK_EX)
        fd = open_lock(path)
        fcntl.flock(fd, fcntl.LOCK_SH)
    finally:
        os.close(turn)  # closing releases the turnstile
    return fd


def _path() -> str | None:
    return os.environ.get("COMPILEKIT_CPU_LOCK")


def adopt_inherited() -> None:
    """In a cell process: remember the shared CPU lock the parent handed down, if any."""
    global _shared_fd
    fd = os.environ.get("COMPILEKIT_CPU_LOCK_FD")
    if _path() and fd:
        _shared_fd = int(fd)


def release_shared() -> None:
    global _shared_fd
    if _shared_fd is not None:
        os.close(_shared_fd)  # the only descriptor left on that lock: closing releases it
        _shared_fd = None


def acquire_shared() -> None:
    global _shared_fd
    if _path() and _shared_fd is None:
        _shared_fd = shared_fd(_path())


@contextlib.contextmanager
def cpu_alone(record: dict):
    """Hold the CPU lock exclusively for the block (the timed calls); record the wait."""
    path = _path()
    if not path:
        yield
        return
    release_shared()
    start = time.perf_counter()
    turn = open_lock(_turnstile(path))
    fd = open_lock(path)
    try:
        fcntl.flock(turn, fcntl.LOCK_EX)
        fcntl.flock(fd, fcntl.LOCK_EX)
        record["cpu_lock_wait_s"] = round(time.perf_counter() - start, 3)
        yield
    finally:
        os.close(fd)
        os.close(turn)
    acquire_shared()


def gpu_turn(record: dict):
    """Hold this cell's GPU alone for the block (COMPILEKIT_GPU_LOCK): work that yields a
    figure. Records the wait. Never inside gpu_shared: one process, two descriptors, would
    wait for itself."""
    return _gpu(record, exclusive=True)


def gpu_shared(record: dict):
    """Share this cell's GPU with other cells' GPU work that yields no figure, for the block."""
    return _gpu(record, exclusive=False)


@contextlib.contextmanager
def _gpu(record: dict, exclusive: bool):
    path = os.environ.get("COMPILEKIT_GPU_LOCK")
    if not path:
        yield
        return
    release_shared()  # waiting for the GPU while holding the CPU lock could deadlock a timer
    start = time.perf_counter()
    turn, fd = open_lock(_turnstile(path)), open_lock(path)
    try:
        fcntl.flock(turn, fcntl.LOCK_EX)
        fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        if not exclusive:  # a sharer lets the next one in; a figure keeps them out
            os.close(turn)
            turn = None
        record["gpu_lock_wait_s"] = round(
            record.get("gpu_lock_wait_s", 0) + time.perf_counter() - start, 3
        )
        acquire_shared()
        yield
    finally:
        os.close(fd)
        if turn is not None:
            os.close(turn)
