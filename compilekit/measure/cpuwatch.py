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

    def text(self) -> str:
        """'other processes used 2.1 cores (python3 -m compilekit.launch.cell cold 1.9); 0.4 stolen
        by the hypervisor'."""
        busiest = ", ".join(f"{name} {cores:.1f}" for name, cores in self.top)
        text = f"other processes used {self.others_cores:.1f} cores" + (
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
        }


def _machine_ticks() -> tuple[int, int]:
    """(busy, stolen) clock ticks of all CPUs since boot, from /proc/stat's first line."""
    with open(os.path.join(PROC, "stat")) as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (fields + [0] * 8)[:8]
    return user + nice + system + irq + softirq, steal


def _process_ticks(pid: str) -> int | None:
    """utime + stime of one process (all its threads), or None if it is gone."""
    try:
        with open(os.path.join(PROC, pid, "stat")) as f:
            after_name = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return int(after_name[11]) + int(after_name[12])  # fields 14 and 15 of proc(5)


def _all_processes() -> dict[str, int]:
    ticks = {}
    for pid in os.listdir(PROC):
        if pid.isdigit() and (t := _process_ticks(pid)) is not None:
            ticks[pid] = t
    return ticks


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


def snapshot() -> tuple:
    """(perf_counter, (busy, stolen) machine ticks, {pid: ticks}) now; OSError or ValueError
    where /proc cannot be read."""
    return time.perf_counter(), _machine_ticks(), _all_processes()


def use_between(start: tuple, end: tuple, me: str, hz: int, name=None) -> CpuUse | None:
    """The CPU use between two snapshots, this process (pid `me`) left out; None for a block
    under MIN_WALL_S. `name(pid)` names a process (default: its command line)."""
    (t0, (busy0, steal0), procs0), (t1, (busy1, steal1), procs1) = start, end
    wall = t1 - t0
    if wall < MIN_WALL_S:
        return None
    mine = procs1.get(me, 0) - procs0.get(me, 0)

    def cores(ticks: int) -> float:
        return max(0.0, ticks / hz / wall)

    others = sorted(
        ((procs1[p] - procs0.get(p, 0), p) for p in procs1 if p != me),  # new ones too
        reverse=True,
    )
    name = name or _command
    top = [(name(p), cores(t)) for t, p in others[:TOP] if cores(t) >= NAMED_CORES]
    return CpuUse(wall, cores(busy1 - busy0 - mine), cores(steal1 - steal0), top, cores(1))


class watch:
    """`with cpuwatch.watch() as w: ...` then w.use: a CpuUse for the block, or None where
    /proc cannot say (not Linux). A block under MIN_WALL_S is read over MIN_WALL_S from its
    start (waiting out the rest): what else ran just after it stands for what ran during it,
    where the block alone would be too short for /proc's clock ticks. Reading /proc takes
    milliseconds, outside the block."""

    def __enter__(self):
        self.use = None
        try:
            self._start = snapshot()
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
            end = snapshot()
        except (OSError, ValueError):
            return False
        self.use = use_between(self._start, end, str(os.getpid()), os.sysconf("SC_CLK_TCK"))
        return False
