"""No process a cell starts outlives it, whatever its session.

A cell's phase process runs in a session of its own. When it ends, its process group is killed
(helpers that stayed in it), and so is every process it left behind in a session of its own:
this process is made a child subreaper (PR_SET_CHILD_SUBREAPER, Linux), so such orphans are
re-parented here instead of to init, and they are known as the cell's by the
COMPILEKIT_PARENT_PID=<this pid> every phase process is started with (children inherit it).
Elsewhere than Linux only the process group is killed. The cell process's own side is here
too: it dies with its parent, ends itself (and its compile workers) at its timeout, leaving
TIMED_OUT for the parent to read, and exits without the interpreter's teardown.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
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


def _children() -> set[int]:
    """This process's live children (a zombie has ended already)."""
    me, found = os.getpid(), set()
    for name in os.listdir("/proc") if os.path.isdir("/proc") else []:
        stat = _stat(int(name)) if name.isdigit() else None
        if stat and stat[0] == me and stat[1] != "Z":
            found.add(int(name))
    return found


def orphans(running: set[int]) -> list[int]:
    """This process's children that are not running phase processes but carry a cell's mark."""
    return sorted(pid for pid in _children() - set(running) if _marked(pid))


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


@contextlib.contextmanager
def started_here_ended():
    """End every process started while the block runs, whatever its session: the front doors
    import a user's variant or pass file to check it, and a helper such a file starts at import
    (holding the terminal's stdout, which kept `compilekit run ... | tail` waiting) would
    otherwise outlive the command. The cell's own processes import the file again and reap
    their helpers as every phase process's are."""
    become_subreaper()  # what a helper starts in a session of its own comes back here
    before = _children()
    try:
        yield
    finally:
        with LOCK:
            for _ in range(8):  # a helper's own children become ours when it dies
                found = _children() - before
                if not found:
                    break
                for pid in found:
                    _kill(pid)


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


# The cell process's own side: it dies with its parent, ends itself at its timeout, and exits
# without the interpreter's teardown.
# Left in the stage folder by a cell process that ended itself at its timeout: the parent
# reads the failure from it, not from the log's words.
TIMED_OUT = "timed_out"


def die_with_parent_and_on_timeout(timeout_s: float, stage_dir: str) -> None:
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


def exit_now(code: int) -> None:
    """End the cell process without the interpreter's teardown (torch's and Inductor's exit
    handlers, module cleanup, the CUDA context), which took about 1 s per process on a 2-core
    CPU, for nothing: every file is written and closed by now. What teardown would still have
    done that matters is done here: flush logs and streams. Inductor's compile workers are not
    shut down, which waits for workers still starting (seconds a process): the parent
    ends the process group, and with it the workers (runner._spawn)."""
    import logging

    logging.shutdown()  # TORCH_TRACE and other file handlers
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
