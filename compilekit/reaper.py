"""No process a cell starts outlives it, whatever its session.

A cell's phase process runs in a session of its own. When it ends, its process group is killed
(helpers that stayed in it), and so is every process it left behind in a session of its own:
this process is made a child subreaper (PR_SET_CHILD_SUBREAPER, Linux), so such orphans are
re-parented here instead of to init, and they are known as the cell's by the
COMPILEKIT_PARENT_PID=<this pid> every phase process is started with (children inherit it).
Elsewhere than Linux only the process group is killed.
"""

from __future__ import annotations

import os
import signal
import threading

MARK = "COMPILEKIT_PARENT_PID"
# Held while a phase process is started and recorded, and while orphans are looked for, so a
# phase process another thread is starting is never taken for an orphan.
LOCK = threading.RLock()
_subreaper = False


def become_subreaper() -> None:
    """Make this process the reaper of its descendants' orphans (once; Linux only)."""
    global _subreaper
    if _subreaper:
        return
    _subreaper = True
    import ctypes

    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(36, 1)  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        pass


def _stat(pid: int) -> tuple[int, str] | None:
    """(parent pid, state letter) of a process, or None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            text = f.read()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()  # the name in parentheses may hold spaces
    return int(fields[1]), fields[0]


def _marked(pid: int) -> bool:
    """Whether the process carries this process's mark (started, at some depth, by a cell)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return f"{MARK}={os.getpid()}".encode() in f.read().split(b"\0")
    except OSError:
        return False


def orphans(running: set[int]) -> list[int]:
    """This process's children that are not running phase processes but carry a cell's mark."""
    me, found = os.getpid(), []
    for name in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if not name.isdigit() or int(name) in running:
            continue
        stat = _stat(int(name))
        if stat and stat[0] == me and stat[1] != "Z" and _marked(int(name)):
            found.append(int(name))
    return found


def _kill(pid: int) -> None:
    for kill in (os.killpg, os.kill):  # its group (what it started there), then itself
        try:
            kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    try:
        os.waitpid(pid, 0)  # a child of ours now: reap it
    except ChildProcessError:
        pass


def end_leftovers(phase_pid: int, running) -> int:
    """Kill what a finished phase process left running: its process group, then every orphan
    of a cell re-parented here (and what those started, round by round). Returns how many
    orphans were ended. running() gives the phase processes still running (other cells')."""
    try:
        os.killpg(phase_pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    ended = 0
    with LOCK:
        for _ in range(8):  # an orphan's own children become orphans when it dies
            found = orphans(running())
            if not found:
                break
            for pid in found:
                _kill(pid)
            ended += len(found)
    return ended
