"""The sweep's CPU lock (compilekit/launch/locks.py): a timer has the CPU alone, and readers that
come while it waits wait for it. Processes, not threads: the lock is held per process."""

import multiprocessing
import os
import time

from compilekit.launch import locks
from tests.conftest import gpu_lock_state

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


def _gpu(path, exclusive, hold_s, events, name):
    """GPU work: a figure (the GPU alone) or none (the GPU shared), for hold_s."""
    os.environ["COMPILEKIT_GPU_LOCK"] = path
    os.environ.pop("COMPILEKIT_CPU_LOCK", None)
    take = locks.gpu_turn if exclusive else locks.gpu_shared
    with take({}):
        events.put((name, "got", time.monotonic()))
        time.sleep(hold_s)
        events.put((name, "done", time.monotonic()))


def test_gpu_work_without_a_figure_shares_the_gpu_and_a_figure_has_it_alone(tmp_path):
    """Two warm compiles run together; the timed calls wait for both and keep a later compile
    out until they are done; two figures never overlap."""
    path, events = str(tmp_path / "gpu0.lock"), CTX.Queue()
    first = _start(_gpu, path, False, 0.6, events, "compile 1")
    second = _start(_gpu, path, False, 0.6, events, "compile 2")
    time.sleep(0.2)
    timed = _start(_gpu, path, True, 0.4, events, "timed")
    time.sleep(0.2)
    late = _start(_gpu, path, False, 0.1, events, "late compile")
    other = _start(_gpu, path, True, 0.2, events, "profile")
    t = _timeline([first, second, timed, late, other], events)
    compiles = [(t[(n, "got")], t[(n, "done")]) for n in ("compile 1", "compile 2")]
    assert max(g for g, _ in compiles) < min(d for _, d in compiles)  # shared: side by side
    assert t[("timed", "got")] >= max(t[("compile 1", "done")], t[("compile 2", "done")])
    assert t[("late compile", "got")] >= t[("timed", "done")]  # kept out while a figure waits
    figures = sorted([(t[(n, "got")], t[(n, "done")]) for n in ("timed", "profile")])
    assert figures[1][0] >= figures[0][1]  # one figure at a time


def test_the_measure_process_holds_the_gpu_alone_only_for_its_figures(tmp_path, monkeypatch):
    """Timed calls and the profile: the GPU alone. The eager probe, the float64 reference:
    shared with other cells' GPU work that yields no figure."""
    from compilekit.evidence import gather
    from compilekit.launch import calls, cell
    from compilekit.measure import inputs, steady
    from compilekit.model.result import for_cell
    from compilekit.model.spec import Cell, parse_shape

    lock = tmp_path / "gpu0.lock"
    monkeypatch.setenv("COMPILEKIT_GPU_LOCK", str(lock))
    monkeypatch.delenv("COMPILEKIT_CPU_LOCK", raising=False)
    seen = {}

    def noting(name, real):
        def wrapper(*args, **kwargs):
            seen[name] = gpu_lock_state(lock)
            return real(*args, **kwargs)

        return wrapper

    monkeypatch.setattr(calls, "eager_first", noting("eager probe", calls.eager_first))
    monkeypatch.setattr(steady, "time_cell", noting("timed calls", lambda *a: None))
    monkeypatch.setattr(inputs, "reference_output", noting("reference", inputs.reference_output))
    monkeypatch.setattr(gather, "gather", noting("profile", lambda *a: None))
    eager = Cell("naive", "eager", parse_shape("1x2x64x16"), "float32", "cpu")
    cell.run_measure(eager, str(tmp_path), str(tmp_path), for_cell(eager))
    assert seen == {
        "eager probe": "shared",
        "timed calls": "alone",
        "reference": "shared",
        "profile": "alone",
    }
