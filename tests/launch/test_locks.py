"""The sweep's CPU lock (compilekit/launch/locks.py): a timer has the CPU alone, and readers that
come while it waits wait for it. Processes, not threads: the lock is held per process."""

import multiprocessing
import os
import time

from compilekit.launch import locks

CTX = multiprocessing.get_context("fork")


def _read(path, hold_s, events, name):
    """A reader (a compile): take the lock shared, hold it, let go."""
    os.environ["COMPILEKIT_CPU_LOCK"] = path
    fd = locks.shared_fd(path)
    events.put((name, "got", time.monotonic()))
    time.sleep(hold_s)
    events.put((name, "done", time.monotonic()))
    os.close(fd)


def _time(path, hold_s, events, name):
    """A timer: the CPU alone for hold_s."""
    os.environ["COMPILEKIT_CPU_LOCK"] = path
    record = {}
    with locks.cpu_alone(record):
        events.put((name, "got", time.monotonic()))
        time.sleep(hold_s)
        events.put((name, "done", time.monotonic()))


def _start(target, *args):
    proc = CTX.Process(target=target, args=args)
    proc.start()
    return proc


def _timeline(procs, events) -> dict:
    for proc in procs:
        proc.join(30)
        assert proc.exitcode == 0
    out = {}
    while not events.empty():
        name, what, at = events.get()
        out[(name, what)] = at
    return out


def test_a_timer_waits_for_readers_and_holds_new_ones_back(tmp_path):
    path, events = str(tmp_path / "cpu.lock"), CTX.Queue()
    compile_ = _start(_read, path, 0.6, events, "compile")
    time.sleep(0.2)
    timer = _start(_time, path, 0.4, events, "timer")
    time.sleep(0.2)
    late = _start(_read, path, 0.1, events, "late compile")
    t = _timeline([compile_, timer, late], events)
    assert t[("timer", "got")] >= t[("compile", "done")]  # no compile beside the timed calls
    assert t[("late compile", "got")] >= t[("timer", "done")]
