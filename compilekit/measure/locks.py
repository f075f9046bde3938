"""Taking turns between the cell processes of one sweep.

- The GPU: a readers-writer lock per GPU (COMPILEKIT_GPU_LOCK). GPU work that yields a figure
  holds it alone: the timed calls, the profile and kernel map, each of Inductor's benchmarks
  (max-autotune's candidates, a kernel's configs). GPU work that yields none shares it: the
  first kernels, the eager probe, a warm or cold compile's first call, the float64 reference;
  a compile lets it go while Dynamo and Inductor work on the CPU, but for its benchmarks
  (gpu_shared_between_compiles); a series of a compile's benchmarks (max-autotune's candidates)
  takes one turn alone, not one each (LINGER_S). So no figure is read while another cell's
  kernels run, and a figure waits for kernels, not for compiles. A turnstile (a second lock
  file) keeps new sharers out while a figure waits, so figures are never starved.
- The CPU: each GPU of the sweep gets a physical core that no cell process runs on
  (QUIET_ENV, core_plan), the rest (BUSY_ENV) carry every cell process and its compile
  workers; the timing thread moves onto its GPU's quiet core for the timed calls (timed_alone),
  while start-ups and compiles go on beside it. A sweep runs several cell processes at once
  only where the machine has such cores, and a CPU cell (whose kernels use every core) with no
  other cell running (launch/sweep.py).

Without the environment variables (a single `compilekit run`) every function here is a no-op.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
import time

from compilekit.model.store import open_lock


def _turnstile(path: str) -> str:
    return path + ".turn"


QUIET_ENV = "COMPILEKIT_QUIET_CORES"  # this cell's GPU's cores for its timed calls
BUSY_ENV = "COMPILEKIT_BUSY_CORES"  # the cores every cell process of the sweep runs on


def _cores(text: str) -> set[int]:
    return {int(c) for c in text.split(",")}


def _siblings(core: int) -> set[int]:
    """The logical CPUs of core's physical core (itself where the kernel does not say)."""
    path = f"/sys/devices/system/cpu/cpu{core}/topology/thread_siblings_list"
    try:
        with open(path) as f:
            text = f.read().strip()
    except OSError:
        return {core}
    out = set()
    for part in text.split(","):
        low, _, high = part.partition("-")
        out.update(range(int(low), int(high or low) + 1))
    return out


def core_plan(gpus: list[str]) -> dict[str, dict[str, str]] | None:
    """For a sweep's cell processes on these GPUs: {gpu: environment} giving each GPU a
    physical core of its own (QUIET_ENV) for its cells' timed calls and all the other cores
    (BUSY_ENV) to every cell process's start-up and compiles. None where the machine has too
    few cores to spare one per GPU and keep two for the rest: the sweep then runs one cell
    process at a time."""
    allowed = os.sched_getaffinity(0)
    groups: list[set[int]] = []
    for core in sorted(allowed, reverse=True):  # the last cores: the first carry the OS's work
        if not any(core in g for g in groups):
            groups.append(_siblings(core) & allowed)
    quiet = dict(zip(gpus, groups))
    busy = allowed - set().union(*quiet.values())
    if len(quiet) < len(gpus) or len(busy) < 2:
        return None
    text = lambda cores: ",".join(map(str, sorted(cores)))  # noqa: E731
    return {gpu: {QUIET_ENV: text(quiet[gpu]), BUSY_ENV: text(busy)} for gpu in gpus}


def keep_off_quiet_cores(pid: int, env: dict) -> None:
    """Put a freshly started cell process (and so the compile workers it will start) on the
    sweep's busy cores, if the sweep has quiet ones."""
    if env.get(BUSY_ENV):
        with contextlib.suppress(ProcessLookupError):
            os.sched_setaffinity(pid, _cores(env[BUSY_ENV]))


@contextlib.contextmanager
def timed_alone(record: dict, device: str):
    """The timed calls: this cell's GPU alone (gpu_turn), and, for a CUDA cell whose GPU the
    sweep gave a quiet core, that core: this thread moves there for the block (the others keep
    to the busy cores, so start-ups and compiles go on beside it). A CPU cell's kernels use
    every core: the sweep runs it with no other cell beside it."""
    quiet = os.environ.get(QUIET_ENV)
    with gpu_turn(record):
        if device != "cuda" or not quiet:
            yield
            return
        before = os.sched_getaffinity(0)
        os.sched_setaffinity(0, _cores(quiet))  # this thread: the one that times
        try:
            yield
        finally:
            os.sched_setaffinity(0, before)


def gpu_turn(record: dict):
    """Hold this cell's GPU alone for the block (COMPILEKIT_GPU_LOCK): work that yields a
    figure. Records the wait. Never inside gpu_shared: one process, two descriptors, would
    wait for itself."""
    return _gpu(record, exclusive=True)


def gpu_shared(record: dict):
    """Share this cell's GPU with other cells' GPU work that yields no figure, for the block."""
    return _gpu(record, exclusive=False)


@contextlib.contextmanager
def gpu_shared_between_compiles(record: dict):
    """gpu_shared, let go while Dynamo and Inductor compile inside the block (CPU work, seconds)
    and taken again before the compiled code runs, so a figure waits for kernels, not for a
    compile. Inductor's GPU benchmarks inside the block (max-autotune's candidates, a kernel's
    configs) each take the GPU alone: their timings choose kernels. The waits are added to
    record["gpu_lock_wait_s"]."""
    path = os.environ.get("COMPILEKIT_GPU_LOCK")
    if not path:
        yield
        return
    from compilekit.compile import settings

    hold = _GpuHold(path, False, record)
    hold.take()
    try:
        with (
            settings.around_compiles(hold.let_go, hold.take),
            settings.benchmarks_alone(hold.alone),
        ):
            yield
    finally:
        hold.let_go()


LINGER_S = 0.1  # how long a compile's benchmark keeps the GPU alone for the next one


class _GpuHold:
    """One process's hold on its GPU's lock, taken and let go as often as asked."""

    def __init__(self, path: str, exclusive: bool, record: dict):
        self.path, self.exclusive, self.record = path, exclusive, record
        self.fds: list[int] = []
        self.depth = 0  # of alone() blocks now open
        self.since: float | None = None  # while held: since when
        # after a benchmark taken from no hold (in a compile): the GPU kept alone for LINGER_S,
        # let go by this timer unless the next benchmark of the series comes first
        self._linger: threading.Timer | None = None
        self._mutex = threading.Lock()
        self._before = exclusive  # the kind of hold to go back to after alone()

    def _stop_lingering(self) -> bool:
        """True if the hold was still alone after a benchmark (and now stays so, untimed)."""
        with self._mutex:
            timer, self._linger = self._linger, None
        if timer is None:
            return False
        timer.cancel()
        return True

    def _linger_over(self) -> None:  # on the timer's thread
        with self._mutex:
            if self._linger is not threading.current_thread():
                return  # stopped meanwhile: the hold is the main thread's again
            self._linger = None
            self._end_alone()

    def _settle(self) -> None:
        """End a linger now, as its timer would."""
        if self._stop_lingering():
            self._end_alone()

    def _end_alone(self) -> None:
        """Let the turn alone go; the hold becomes again the kind it was before alone()."""
        self._release()
        self.exclusive = self._before

    def take(self) -> None:
        self._settle()
        if self.fds:
            return
        start = time.perf_counter()
        turn, fd = open_lock(_turnstile(self.path)), open_lock(self.path)
        self.fds = [fd, turn]
        fcntl.flock(turn, fcntl.LOCK_EX)
        fcntl.flock(fd, fcntl.LOCK_EX if self.exclusive else fcntl.LOCK_SH)
        if not self.exclusive:  # a sharer lets the next one in; a figure keeps them out
            os.close(self.fds.pop())
        now = time.perf_counter()
        self.record["gpu_lock_wait_s"] = round(
            self.record.get("gpu_lock_wait_s", 0) + now - start, 3
        )
        self.since = now
        if self.exclusive:  # each turn alone makes every sharer of the GPU let go first
            self.record["gpu_alone_turns"] = self.record.get("gpu_alone_turns", 0) + 1

    def let_go(self) -> None:
        self._settle()
        self._release()

    def _release(self) -> None:
        if self.fds and self.since is not None:
            # alone: what every other cell of the GPU waited for (summed over a sweep, no
            # schedule on that GPU finishes sooner: sweep.gpu_alone_s); shared: what a figure
            # waiting for the GPU waits for
            key = "gpu_alone_s" if self.exclusive else "gpu_shared_s"
            self.record[key] = round(self.record.get(key, 0) + time.perf_counter() - self.since, 3)
        self.since = None
        while self.fds:
            os.close(self.fds.pop())

    @contextlib.contextmanager
    def alone(self):
        """The GPU alone for the block, then held as before (shared, or not at all). Re-entrant:
        one benchmark may call another. A shared hold is let go first: one process waiting on
        two descriptors would wait for itself. From no hold (a compile's benchmarks: max-
        autotune's candidates, one after another), the GPU stays alone for LINGER_S after the
        block, so a series of benchmarks takes one turn, not one each: every turn waits for
        all sharers to let go and keeps new ones out meanwhile."""
        self.depth += 1
        restore = None  # what the hold was before: "shared" or "free"
        if self.depth == 1:
            if self._stop_lingering():
                restore = "free"  # still alone from the last benchmark of the series
            elif not (self.fds and self.exclusive):
                restore = "shared" if self.fds else "free"
                self._before = self.exclusive
                self.let_go()
                self.exclusive = True
                self.take()
        try:
            yield
        finally:
            self.depth -= 1
            if self.depth == 0 and restore == "shared":
                self._end_alone()
                self.take()
            elif self.depth == 0 and restore == "free":
                timer = threading.Timer(LINGER_S, self._linger_over)
                timer.daemon = True
                with self._mutex:
                    self._linger = timer
                timer.start()


@contextlib.contextmanager
def _gpu(record: dict, exclusive: bool):
    path = os.environ.get("COMPILEKIT_GPU_LOCK")
    if not path:
        yield
        return
    hold = _GpuHold(path, exclusive, record)
    try:
        hold.take()
        yield
    finally:
        hold.let_go()
