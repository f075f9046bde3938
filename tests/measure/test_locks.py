"""Taking turns in a sweep (compilekit/measure/locks.py): the quiet cores, the GPU lock.
Processes, not threads: the locks are held per process."""

import multiprocessing
import os
import time

import pytest

from compilekit.measure import locks
from tests.conftest import gpu_lock_state

CTX = multiprocessing.get_context("fork")


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


def _gpu(path, exclusive, hold_s, events, name):
    """GPU work: a figure (the GPU alone) or none (the GPU shared), for hold_s."""
    os.environ["COMPILEKIT_GPU_LOCK"] = path
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
    from compilekit.launch import cell
    from compilekit.measure import calls, inputs, steady
    from compilekit.model.result import for_cell
    from compilekit.model.spec import Cell, parse_shape

    lock = tmp_path / "gpu0.lock"
    monkeypatch.setenv("COMPILEKIT_GPU_LOCK", str(lock))
    seen = {}

    def noting(name, real):
        def wrapper(*args, **kwargs):
            seen[name] = gpu_lock_state(lock)
            return real(*args, **kwargs)

        return wrapper

    monkeypatch.setattr(calls, "eager_first", noting("eager probe", calls.eager_first))

    def timing(cell, variant, compiled, args, result, alone):
        with alone:  # what the measure process gives the timed calls to hold
            seen["timed calls"] = gpu_lock_state(lock)

    monkeypatch.setattr(steady, "time_cell", timing)
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


def test_each_gpu_gets_a_physical_core_no_cell_process_runs_on(monkeypatch):
    """16 logical CPUs, SMT pairs (n, n+8): two GPUs get the last two physical cores, both
    threads each; the other 12 CPUs carry the cell processes. Two cores for one GPU: too few."""
    monkeypatch.setattr(locks.os, "sched_getaffinity", lambda pid: set(range(16)))
    monkeypatch.setattr(locks, "_siblings", lambda core: {core % 8, core % 8 + 8})
    plan = locks.core_plan(["0", "1"])
    quiet = {gpu: set(map(int, env[locks.QUIET_ENV].split(","))) for gpu, env in plan.items()}
    assert quiet == {"0": {7, 15}, "1": {6, 14}}
    assert {env[locks.BUSY_ENV] for env in plan.values()} == {"0,1,2,3,4,5,8,9,10,11,12,13"}
    monkeypatch.setattr(locks.os, "sched_getaffinity", lambda pid: {0, 1})
    monkeypatch.setattr(locks, "_siblings", lambda core: {core})
    assert locks.core_plan(["0"]) is None


def _timer(device, quiet, busy, events):
    """A cell's timed calls in a sweep with quiet cores, on the busy cores until then."""
    os.environ.update({locks.QUIET_ENV: quiet, locks.BUSY_ENV: busy})
    os.environ.pop("COMPILEKIT_GPU_LOCK", None)
    locks.keep_off_quiet_cores(0, os.environ)
    with locks.timed_alone({}, device):
        events.put((device, "on", sorted(os.sched_getaffinity(0))))
    events.put((device, "after", sorted(os.sched_getaffinity(0))))


def test_a_cuda_timer_takes_its_quiet_core_and_a_cpu_cell_keeps_every_core(tmp_path):
    """A CUDA cell's timed calls run on its GPU's quiet core and go back to the busy ones after;
    a CPU cell's (its kernels use every core, and it runs alone) are not moved."""
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < 2:
        pytest.skip("needs two CPUs")
    quiet, busy = str(cores[-1]), ",".join(map(str, cores[:-1]))
    events = CTX.Queue()
    t = _timeline([_start(_timer, d, quiet, busy, events) for d in ("cuda", "cpu")], events)
    assert t[("cuda", "on")] == [cores[-1]]
    assert t[("cuda", "after")] == cores[:-1]
    assert t[("cpu", "on")] == cores[:-1]


def _compile_under_the_gpu_lock(lock, record):
    """Compile and run a function with gpu_shared_between_compiles; its backend runs one of
    Inductor's GPU benchmarks while it compiles. Returns the GPU lock's state at each step."""
    import torch
    from torch._inductor.runtime.benchmarking import benchmarker

    seen = []

    def bench(step):  # one of Inductor's GPU benchmarks, noting the lock from the kernel
        # on the CPU, a "GPU" benchmark of the CPU device; the lock is all that is looked at
        on = {} if torch.cuda.is_available() else {"device_type": "cpu"}
        benchmarker.benchmark_gpu(lambda: seen.append((step, gpu_lock_state(lock))), **on)

    def backend(gm, example_inputs):
        seen.append(("compiling", gpu_lock_state(lock)))
        bench("benchmarking")
        seen.append(("compiling", gpu_lock_state(lock)))

        def run(*args):
            seen.append(("running", gpu_lock_state(lock)))
            return gm.forward(*args)

        return run

    torch._dynamo.reset()
    fn = torch.compile(lambda x: (x + 1).sin(), backend=backend)
    with locks.gpu_shared_between_compiles(record):
        seen.append(("before", gpu_lock_state(lock)))
        fn(torch.ones(3))
        bench("benchmarking at run time")  # e.g. a kernel's launch configs, on its first call
        seen.append(("after it", gpu_lock_state(lock)))
    seen.append(("after", gpu_lock_state(lock)))
    return list(dict.fromkeys(seen))  # each step once, in order


def test_a_compile_lets_the_gpu_go_while_it_compiles_but_for_its_benchmarks(tmp_path, monkeypatch):
    """Shared before the compile, free while Dynamo and the backend work but alone for each of
    Inductor's GPU benchmarks (they choose kernels), shared again for the compiled code's
    kernels; free after the block."""
    lock = tmp_path / "gpu0.lock"
    monkeypatch.setenv("COMPILEKIT_GPU_LOCK", str(lock))
    record = {}
    seen = _compile_under_the_gpu_lock(lock, record)
    assert seen == [
        ("before", "shared"),
        ("compiling", "free"),
        ("benchmarking", "alone"),
        ("compiling", "alone"),  # kept for the series' next benchmark (LINGER_S at most)
        ("running", "shared"),
        ("benchmarking at run time", "alone"),
        ("after it", "shared"),
        ("after", "free"),
    ]
    assert "gpu_lock_wait_s" in record


def test_benchmarks_take_the_gpu_alone_on_a_torch_without_the_hook(tmp_path, monkeypatch):
    """Before torch 2.13 there is no set_gpu_benchmark_lock_context: benchmark_gpu is wrapped
    for the block, and each benchmarker class gets its own method back after it."""
    from torch._inductor.runtime import benchmarking

    monkeypatch.delattr(benchmarking, "set_gpu_benchmark_lock_context", raising=False)
    classes = {
        cls: vars(cls)["benchmark_gpu"]
        for cls in vars(benchmarking).values()
        if isinstance(cls, type) and "benchmark_gpu" in vars(cls)
    }
    assert classes  # the benchmarkers this relies on are still there
    lock = tmp_path / "gpu0.lock"
    monkeypatch.setenv("COMPILEKIT_GPU_LOCK", str(lock))
    seen = _compile_under_the_gpu_lock(lock, {})
    assert ("benchmarking", "alone") in seen and ("compiling", "free") in seen
    assert all(vars(cls)["benchmark_gpu"] is fn for cls, fn in classes.items())


def test_a_benchmark_in_a_held_block_takes_the_gpu_alone_and_gives_back_the_share(tmp_path):
    """alone() inside a shared hold: alone for the benchmark (and one nested in it), shared
    again after, as the block had it."""
    lock = tmp_path / "gpu0.lock"
    hold = locks._GpuHold(str(lock), False, {})
    hold.take()
    with hold.alone():
        with hold.alone():
            inner = gpu_lock_state(lock)
        outer = gpu_lock_state(lock)
    after = gpu_lock_state(lock)
    hold.let_go()
    assert (inner, outer, after, gpu_lock_state(lock)) == ("alone", "alone", "shared", "free")


def test_the_time_a_cell_holds_the_gpu_alone_and_shared_is_counted_apart(tmp_path):
    """gpu_alone_s: the seconds other cells of the GPU had to wait for; a shared hold adds to
    gpu_shared_s instead, and a benchmark inside a shared hold adds its own time only."""
    path = str(tmp_path / "gpu0.lock")
    os.environ["COMPILEKIT_GPU_LOCK"] = path
    try:
        record = {}
        with locks.gpu_shared(record):
            time.sleep(0.2)
        assert "gpu_alone_s" not in record and 0.2 <= record["gpu_shared_s"] < 0.4, record
        with locks.gpu_turn(record):
            time.sleep(0.3)
        assert 0.3 <= record["gpu_alone_s"] < 0.5, record
        record = {}
        hold = locks._GpuHold(path, False, record)
        hold.take()
        with hold.alone():
            time.sleep(0.2)
        time.sleep(0.4)  # shared again: not counted
        hold.let_go()
        assert 0.2 <= record["gpu_alone_s"] < 0.4 <= record["gpu_shared_s"] < 0.6, record
        assert record["gpu_alone_turns"] == 1, record
    finally:
        del os.environ["COMPILEKIT_GPU_LOCK"]


def test_the_cold_process_takes_the_gpu_after_its_cpu_work(tmp_path, monkeypatch):
    """The CUDA context and Inductor's settings are CPU work: made before the cold process takes
    its share of the GPU, so another cell's figure never waits for them; the eager call after."""
    import contextlib

    from compilekit.compile import settings
    from compilekit.launch import coldphase
    from compilekit.measure import calls
    from compilekit.model.result import for_cell
    from compilekit.model.spec import Cell, parse_shape

    lock = tmp_path / "gpu0.lock"
    monkeypatch.setenv("COMPILEKIT_GPU_LOCK", str(lock))
    monkeypatch.delenv(coldphase.BESIDE_ENV, raising=False)
    seen = {}
    real_settings = settings.toolkit_settings

    @contextlib.contextmanager
    def noted_settings(*args, **kwargs):
        seen["settings"] = gpu_lock_state(lock)
        with real_settings(*args, **kwargs) as changes:
            yield changes

    monkeypatch.setattr(settings, "toolkit_settings", noted_settings)
    monkeypatch.setattr(
        calls, "make_device_context", lambda *a: seen.setdefault("context", gpu_lock_state(lock))
    )
    monkeypatch.setattr(
        calls, "eager_first", lambda *a: seen.setdefault("eager", gpu_lock_state(lock))
    )
    monkeypatch.setattr(calls, "compiled_first_call", lambda *a: (None, 0.0, None))
    cell = Cell("naive", "max-autotune", parse_shape("1x2x64x16"), "float32", "cpu")
    coldphase.run_cold(cell, str(tmp_path), for_cell(cell))
    assert seen == {"context": "free", "settings": "free", "eager": "shared"}


def test_a_series_of_benchmarks_in_a_compile_is_one_turn_alone(tmp_path):
    """From no hold (in a compile), benchmarks one after another keep the GPU alone between
    them: one turn, not one each; LINGER_S after the last one the GPU is free again, and a hold
    taken meanwhile (the compile's end) is taken at once."""
    lock = tmp_path / "gpu0.lock"
    record = {}
    hold = locks._GpuHold(str(lock), False, record)
    for _ in range(3):
        with hold.alone():
            assert gpu_lock_state(lock) == "alone"
    assert gpu_lock_state(lock) == "alone"
    time.sleep(locks.LINGER_S * 3)
    assert gpu_lock_state(lock) == "free" and record["gpu_alone_turns"] == 1, record
    with hold.alone():
        pass
    hold.take()  # the compile ends: shared, at once
    assert gpu_lock_state(lock) == "shared" and record["gpu_alone_turns"] == 2, record
    hold.let_go()
    assert gpu_lock_state(lock) == "free"


def test_in_a_sweep_the_measure_process_waits_for_the_capture_only_before_the_kernel_map(
    tmp_path, monkeypatch
):
    """max-autotune's capture process runs beside the measure process: where the sweep gave the
    timed calls a core of their own and the GPU a lock, the measure process goes on at once
    (the cold compile is done) and waits for the capture before the kernel map; a single run
    waits for it first."""
    import fcntl
    import threading

    from compilekit.launch import coldphase
    from compilekit.model.result import for_cell
    from compilekit.model.spec import Cell, parse_shape
    from compilekit.model.store import open_lock

    cache = tmp_path / "cache"
    (cache / "capture").mkdir(parents=True)
    (cache / "cold.json").write_text("{}")
    cell = Cell("naive", "max-autotune", parse_shape("1x2x64x16"), "float32", "cpu")
    monkeypatch.setenv(coldphase.BESIDE_ENV, "1")
    monkeypatch.setenv("COMPILEKIT_GPU_LOCK", str(tmp_path / "gpu0.lock"))
    monkeypatch.setenv(locks.QUIET_ENV, "1")

    def capture_for(seconds, leaves_graphs=True):  # the capture process: COLD_LOCK held
        held = open_lock(str(cache / coldphase.COLD_LOCK))
        fcntl.flock(held, fcntl.LOCK_EX)

        def end():
            time.sleep(seconds)
            if leaves_graphs:
                (cache / "capture" / "graphs.json").write_text("{}")
            os.close(held)

        threading.Thread(target=end).start()

    capture_for(0.5)
    result = for_cell(cell)
    coldphase.wait_for_cold(str(cache), result, cell)
    assert result.steps_s["wait_for_cold"] < 0.3  # on at once: warm compile, timed calls
    coldphase.wait_for_capture(cell, str(cache), result)
    assert result.steps_s["wait_for_capture"] >= 0.3  # the kernel map needs the capture

    (cache / "capture" / "graphs.json").unlink()
    capture_for(0.3, leaves_graphs=False)
    with pytest.raises(coldphase.ColdEnded):  # the capture failed: the cell ends there
        coldphase.wait_for_capture(cell, str(cache), for_cell(cell))

    monkeypatch.delenv(locks.QUIET_ENV)  # a single run: the capture is waited for first
    capture_for(0.5)
    result = for_cell(cell)
    coldphase.wait_for_cold(str(cache), result, cell)
    assert result.steps_s["wait_for_cold"] >= 0.4


def test_a_triton_autotuner_times_its_configs_with_the_gpu_alone(tmp_path, monkeypatch):
    """A hand-written kernel's @triton.autotune times its configs on its first call: in a held
    block each timing takes the GPU alone, and the Autotuner gets its own method back after."""
    autotuner = pytest.importorskip("triton.runtime.autotuner").Autotuner
    lock = tmp_path / "gpu0.lock"
    monkeypatch.setenv("COMPILEKIT_GPU_LOCK", str(lock))
    seen = []

    def bench(self, *args, config=None, **meta):
        seen.append((config, gpu_lock_state(lock)))
        return [1.0, 1.0, 1.0]

    monkeypatch.setattr(autotuner, "_bench", bench)
    with locks.gpu_shared_between_compiles({}):
        assert autotuner._bench(None, config="BLOCK_M 64") == [1.0, 1.0, 1.0]
        seen.append(("between configs", gpu_lock_state(lock)))
    assert seen == [("BLOCK_M 64", "alone"), ("between configs", "shared")]
    assert vars(autotuner)["_bench"] is bench
