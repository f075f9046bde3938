"""Who else used the CPU while the toolkit timed.

A host-bound cell's time is the CPU's, so when its samples spread the first question is whether
something else ran. Linux's /proc answers it for a block of time: the machine's busy CPU time
minus this process's own (other processes: how many cores they kept busy, and which used the
most) and the stolen time (the hypervisor ran another guest on our cores: invisible to any
process list, common on shared VM hosts). Elsewhere nothing is known: watch() gives None.
"""

from __future__ import annotations

import dataclasses
import os
import time

PROC = "/proc"
# Other processes' CPU use worth naming, in cores over the block.
NAMED_CORES = 0.1
TOP = 3
# /proc counts in clock ticks (10 ms): over a shorter block one stray tick reads as many cores
# (at this one, 0.2 cores). A CPU cell's timed calls at the tests' shape take 0.04-0.06 s, so
# watch() reads a shorter block over this long from its start.
MIN_WALL_S = 0.05


@dataclasses.dataclass
class CpuUse:
    """CPU use over one block of wall time, in cores (1.0: one core busy all along)."""

    wall_s: float
    others_cores: float  # every process but this one (and the kernel's own work)
    steal_cores: float  # time the hypervisor gave our cores to another guest
    top: list  # [(command line, cores)] of the busiest other processes, most first
    tick_cores: float = 0.0  # the figures' resolution: one clock tick over the block
    cores: list | None = None  # the CPUs watched, where not the whole machine

    def text(self) -> str:
        """'other processes used 2.1 cores (python3 -m compilekit.launch.cell cold 1.9); 0.4 stolen
        by the hypervisor', with ' of CPUs 14,15' where only those were watched."""
        busiest = ", ".join(f"{name} {cores:.1f}" for name, cores in self.top)
        scope = f" of CPUs {','.join(map(str, self.cores))}" if self.cores else ""
        text = f"other processes used {self.others_cores:.1f} cores{scope}" + (
            f" ({busiest})" if busiest else ""
        )
        if self.steal_cores >= NAMED_CORES:
            text += f"; {self.steal_cores:.1f} stolen by the hypervisor"
        return text

    def to_dict(self) -> dict:
        return {
            "wall_s": round(self.wall_s, 3),
            "others_cores": round(self.others_cores, 3),
            "steal_cores": round(self.steal_cores, 3),
            "top": [[name, round(cores, 3)] for name, cores in self.top],
            "tick_cores": round(self.tick_cores, 3),
        } | ({"cores": self.cores} if self.cores else {})


def timing_cores() -> frozenset[int] | None:
    """The CPUs this thread may run on, where that is not every CPU (a sweep moves its timing
    thread onto a core no other cell process uses; a user may taskset a run), else None: other
    processes on the other CPUs do not compete with it, so only these are worth watching."""
    if not hasattr(os, "sched_getaffinity"):
        return None
    mine = frozenset(os.sched_getaffinity(0))
    return mine if len(mine) < (os.cpu_count() or 0) else None


def _machine_ticks(cores=None) -> tuple[int, int]:
    """(busy, stolen) clock ticks since boot of all CPUs (/proc/stat's first line) or of these."""
    with open(os.path.join(PROC, "stat")) as f:
        lines = f.read().splitlines()
    if cores is None:
        rows = lines[:1]
    else:
        rows = [r for r in lines if r[3:4].isdigit() and int(r.split()[0][3:]) in cores]
    busy = stolen = 0
    for row in rows:
        fields = [int(x) for x in row.split()[1:]]
        user, nice, system, _idle, _iowait, irq, softirq, steal = (fields + [0] * 8)[:8]
        busy, stolen = busy + user + nice + system + irq + softirq, stolen + steal
    return busy, stolen


def _process_stat(pid: str) -> tuple[int, int] | None:
    """(utime + stime of one process, all its threads; the CPU it last ran on), or None if it
    is gone."""
    try:
        with open(os.path.join(PROC, pid, "stat")) as f:
            after_name = f.read().rsplit(")", 1)[1].split()
        # proc(5)'s fields 14 and 15 (user and system ticks) and 39 (the CPU last run on)
        return int(after_name[11]) + int(after_name[12]), int(after_name[36])
    except (OSError, IndexError, ValueError):
        return None


def _all_processes() -> dict[str, tuple[int, int]]:
    """{pid: (ticks, the CPU it last ran on)} of every process."""
    procs = {}
    for pid in os.listdir(PROC):
        if pid.isdigit() and (stat := _process_stat(pid)) is not None:
            procs[pid] = stat
    return procs


def _command(pid: str) -> str:
    try:
        with open(os.path.join(PROC, pid, "cmdline"), "rb") as f:
            args = f.read().split(b"\0")
    except OSError:
        return f"pid {pid}"
    args = [a.decode(errors="replace") for a in args if a]
    if not args:
        return f"pid {pid}"
    # one line: a `python -c` script's newlines would split the note that names it
    return " ".join(" ".join([os.path.basename(args[0])] + args[1:4]).split())[:80]


def snapshot(cores=None) -> tuple:
    """(perf_counter, (busy, stolen) ticks of the whole machine or of these CPUs, {pid: (ticks,
    last CPU)} of every process) now; OSError or ValueError where /proc cannot be read."""
    return time.perf_counter(), _machine_ticks(cores), _all_processes()


def use_between(
    start: tuple, end: tuple, me: str, hz: int, name=None, cores=None
) -> CpuUse | None:
    """The CPU use between two snapshots (taken over `cores`, or the whole machine), this
    process (pid `me`) left out; None for a block under MIN_WALL_S. Over some CPUs, the
    processes named are those that last ran on them at the end. `name(pid)` names a process
    (default: its command line)."""
    (t0, (busy0, steal0), procs0), (t1, (busy1, steal1), procs1) = start, end
    wall = t1 - t0
    if wall < MIN_WALL_S:
        return None

    def ticks_between(pid: str) -> int:  # a process started meanwhile: its whole life
        return procs1[pid][0] - procs0.get(pid, (0, None))[0]

    mine = ticks_between(me) if me in procs1 else 0

    def to_cores(ticks: int) -> float:
        return max(0.0, ticks / hz / wall)

    there = [p for p in procs1 if p != me and (cores is None or procs1[p][1] in cores)]
    others = sorted(((ticks_between(p), p) for p in there), reverse=True)
    name = name or _command
    top = [(name(p), to_cores(t)) for t, p in others[:TOP] if to_cores(t) >= NAMED_CORES]
    watched = sorted(cores) if cores else None
    return CpuUse(
        wall, to_cores(busy1 - busy0 - mine), to_cores(steal1 - steal0), top, to_cores(1), watched
    )


class watch:
    """`with cpuwatch.watch(cores) as w: ...` then w.use: a CpuUse for the block, over these
    CPUs (timing_cores()) or, with None, the whole machine; None where /proc cannot say (not
    Linux). Over some CPUs, this process's ticks on any CPU are left out of theirs: its other
    threads idle while it times, and on a CPU cell its kernels' threads run on those CPUs.
    A block under MIN_WALL_S is read over MIN_WALL_S from its start (waiting out the rest):
    what else ran just after it stands for what ran during it, where the block alone would be
    too short for /proc's clock ticks. Reading /proc takes milliseconds, outside the block."""

    def __init__(self, cores=None):
        self.cores = cores

    def __enter__(self):
        self.use = None
        try:
            self._start = snapshot(self.cores)
        except (OSError, ValueError):
            self._start = None
        return self

    def __exit__(self, *exc):
        if self._start is None:
            return False
        short = MIN_WALL_S - (time.perf_counter() - self._start[0])
        if short > 0:
            time.sleep(short)
        try:
            end = snapshot(self.cores)
        except (OSError, ValueError):
            return False
        hz = os.sysconf("SC_CLK_TCK")
        self.use = use_between(self._start, end, str(os.getpid()), hz, cores=self.cores)
        return False
