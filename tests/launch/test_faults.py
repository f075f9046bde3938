"""After a cell has started: timeouts, crashes, orphans, locks, corrupt state, failed reruns,
unwritable places and the smaller input problems. Eager cells (seconds each) unless a compile is
the point."""

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from compilekit.launch import cache, runner
from compilekit.model import result as results
from compilekit.model.spec import Cell, parse_shape
from tests.conftest import ROOT

SMALL = "1x2x64x16"


def _file(folder, name, body):
    path = folder / name
    path.write_text(textwrap.dedent(body))
    return str(path)


HANG = """
import time

def attention(q, k, v):
    open({marker!r}, "w").close()
    while True:
        time.sleep(0.1)
"""


def _cmdlines_with(marker: str) -> list[int]:
    pids = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    if marker.encode() in f.read():
                        pids.append(int(pid))
            except OSError:
                pass
    return pids


def _wait_for(path, seconds=120):
    deadline = time.time() + seconds
    while time.time() < deadline and not os.path.exists(path):
        time.sleep(0.1)
    assert os.path.exists(path), f"{path} never appeared"


def test_timeout_is_recorded_and_the_good_result_stays(tmp_path, cache_root):
    out = str(tmp_path / "out")
    hang = _file(tmp_path, "hang.py", HANG.format(marker=str(tmp_path / "started")))
    cell = Cell(f"{hang}:attention", "eager", parse_shape(SMALL), "float32", "cpu")
    result = runner.launch(cell, out, cache_root=cache_root, timeout_s=8)
    assert result.status == "failed" and "timed out after 8 s" in result.reason
    # a field, from the mark the process left, not from its log's words
    assert result.failure == "timeout" and not os.listdir(result.run_dir).count("timed_out")
    # a good run of the same label first, then a failing rerun: the good one stays
    good_cell = Cell("naive", "eager", parse_shape(SMALL), "float32", "cpu")
    good = runner.launch(good_cell, out, cache_root=cache_root)
    assert good.status == "ok"
    bad = runner.launch(good_cell, out, cache_root=cache_root, timeout_s=0.01)
    assert bad.status == "failed" and "attempts" in bad.run_dir
    from compilekit.model import result as results

    kept = results.load(good.run_dir)
    assert kept.status == "ok" and len(kept.attempts) == 1
    assert os.path.isfile(os.path.join(good.run_dir, kept.attempts[0]["dir"], "result.json"))


def test_crash_names_exit_code_and_last_log_lines(run_cell, tmp_path_factory):
    folder = tmp_path_factory.mktemp("crash")
    path = _file(
        folder,
        "crash.py",
        """
        import os

        def attention(q, k, v):
            print("about to leave: bad state in my kernel", flush=True)
            os._exit(7)
        """,
    )
    result = run_cell(f"{path}:attention", "eager")
    assert result.status == "failed"
    assert "exit code 7" in result.reason and "bad state in my kernel" in result.reason
    assert result.failure == "crash"


def test_a_sigkill_not_from_a_timeout_names_the_out_of_memory_killer(tmp_path):
    """The kernel kills a process that takes too much memory with SIGKILL and no word: the
    record says what most often sent it, and how much memory the machine has."""
    (tmp_path / "log.txt").write_text("building the model\n")
    cell = Cell("naive", "eager", parse_shape(SMALL), "float32", "cpu")
    killed = runner._died(cell, "measure", -signal.SIGKILL, 60, str(tmp_path))
    assert (
        "(killed by SIGKILL, most often the kernel's out-of-memory killer; this machine has"
        in (killed.reason)
    )
    assert "building the model" in killed.reason and killed.failure == "crash"
    segfault = runner._died(cell, "measure", -signal.SIGSEGV, 60, str(tmp_path))
    assert "(killed by SIGSEGV);" in segfault.reason


def _hanging_sweep(tmp_path, name: str, cache_root: str):
    """A sweep (in its own session) whose one cell hangs; returns (process, toml, marker)."""
    marker = str(tmp_path / f"{name}_started")
    hang = _file(tmp_path, f"{name}.py", HANG.format(marker=marker))
    toml = tmp_path / f"{name}.toml"
    toml.write_text(
        f'variants = ["{hang}:attention"]\nmodes = ["eager"]\nshapes = ["{SMALL}"]\n'
        'device = "cpu"\ntimeout_s = 600\n'
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "compilekit", "sweep", str(toml), "--out", str(tmp_path / "o")],
        cwd=ROOT,
        env={**os.environ, "COMPILEKIT_CACHE": cache_root},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    return proc, toml, marker


def test_sigkilled_sweep_leaves_no_cell_process(tmp_path, cache_root):
    proc, _, marker = _hanging_sweep(tmp_path, "orphan_hang", cache_root)
    _wait_for(marker)
    assert _cmdlines_with("orphan_hang.py"), "the cell process should be running"
    proc.send_signal(signal.SIGKILL)  # the sweep alone, not its process group
    proc.wait()
    deadline = time.time() + 10  # the orphaned cell notices its parent's death, then ends
    while time.time() < deadline and _cmdlines_with("orphan_hang.py"):
        time.sleep(0.2)
    assert _cmdlines_with("orphan_hang.py") == []


def test_second_run_of_a_cell_and_second_sweep_are_refused(tmp_path, cache_root, cli):
    first, toml, marker = _hanging_sweep(tmp_path, "lock_hang", cache_root)
    hang = str(tmp_path / "lock_hang.py")
    try:
        _wait_for(marker)
        again = cli("sweep", str(toml), "--out", str(tmp_path / "o"))
        assert again.returncode == 2
        assert f"another compilekit sweep (PID {first.pid})" in again.stderr
        assert len(again.stderr.strip().splitlines()) == 1
        run = cli(
            "run",
            "--variant",
            f"{hang}:attention",
            "--mode",
            "eager",
            "--shape",
            SMALL,
            "--device",
            "cpu",
            "--out",
            str(tmp_path / "o2"),
        )
        assert (
            run.returncode == 2 and "is being measured by another compilekit process" in run.stderr
        )
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        first.wait()


def test_corrupt_result_is_redone_and_skipped_in_reports(tmp_path, cache_root, cli):
    toml = tmp_path / "c.toml"
    toml.write_text(
        'variants = ["naive", "sdpa"]\nmodes = ["eager"]\nshapes = ["1x2x64x16"]\ndevice = "cpu"\n'
    )
    out = tmp_path / "out"
    assert cli("sweep", str(toml), "--out", str(out)).returncode == 0
    naive = out / "naive__eager__1x2x64x16__float32__cpu"
    sdpa = out / "sdpa__eager__1x2x64x16__float32__cpu"
    (naive / "result.json").write_text('{"variant": "nai')
    proc = cli("report", str(out))
    assert proc.returncode == 0 and f"skipped {naive}/result.json is corrupt" in proc.stderr
    proc = cli("kernels", str(naive))
    assert proc.returncode == 2 and "result.json is corrupt" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    (sdpa / "kernels.json").unlink()
    proc = cli("sweep", str(toml), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "0 already done, 2 to run" in proc.stdout
    assert "result.json is corrupt" in proc.stdout and "kernels.json is missing" in proc.stdout
    (sdpa / "kernels.json").write_text("")
    proc = cli("diff", str(naive), str(sdpa))
    assert proc.returncode == 2 and "kernels.json" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_corrupt_cold_json_is_dropped_and_compiled_again(run_cell, cache_root, tmp_path):
    # sdpa: the cheapest compile of the suite's cells (cpu_small's sweep reuses its cache)
    first = run_cell("sdpa", "default")
    cell = Cell("sdpa", "default", parse_shape("1x4x128x32"), "float32", "cpu")
    cache_dir = cache.folder(cell, cache_root)
    with open(os.path.join(cache_dir, "cold.json"), "w") as f:
        f.write("{")
    again = runner.launch(cell, str(tmp_path), cache_root=cache_root)
    assert again.status == "ok", again.reason
    assert "cold.json is corrupt" in again.compile_notes["cache"]
    assert again.compile_cold_s != first.compile_cold_s  # measured anew
    assert set(again.processes) == {"cold", "measure"}


def test_launch_failures_become_failed_cells_and_the_sweep_goes_on(tmp_path, monkeypatch):
    import io

    from compilekit.launch import sweep
    from compilekit.userexperiment import load_experiment

    toml = tmp_path / "two.toml"
    toml.write_text(
        f'variants = ["sdpa", "naive"]\nmodes = ["eager"]\nshapes = ["{SMALL}"]\ndevice = "cpu"\n'
    )

    def launch(cell, out_dir, **kwargs):  # a full disk for one cell, a record for the other
        if cell.variant == "sdpa":
            raise OSError(28, "No space left on device")
        return results.for_cell(cell, status="ok", compiled_ms=1.0)

    monkeypatch.setattr(runner, "launch", launch)
    log = io.StringIO()
    done = sweep.run_sweep(load_experiment(str(toml)), str(tmp_path / "out"), log=log)
    assert [r.status for r in done] == ["failed", "ok"], log.getvalue()
    assert "No space left on device" in done[0].reason and "[2/2] naive eager" in log.getvalue()


def test_a_long_function_name_gets_a_bounded_label_and_runs(tmp_path, cli):
    long_name = "attention_" + "x" * 250
    user = _file(tmp_path, "long.py", f"def {long_name}(q, k, v):\n    return q * 1\n")
    proc = cli("run", "--variant", f"{user}:{long_name}", "--mode", "eager", "--device", "cpu",
               "--shape", SMALL, "--out", str(tmp_path / "out"))  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (label,) = os.listdir(tmp_path / "out")
    assert len(label) <= 200 and label.startswith("long.attention_xxx")
    other = Cell(f"{user}:{long_name}", "eager", parse_shape(SMALL), "float32", "cpu", seed=1)
    assert other.label() != label and len(other.label()) <= 200  # the hash keeps them apart


def test_buggy_variant_in_a_sweep_exits_1_and_names_it(tmp_path, cli):
    user = _file(tmp_path, "buggy.py", "def attention(q, k, v):\n    return [q][3]\n")
    toml = tmp_path / "bug.toml"
    toml.write_text(
        f'variants = ["{user}:attention", "naive"]\nmodes = ["eager"]\nshapes = ["{SMALL}"]\n'
        'device = "cpu"\n'
    )
    proc = cli("sweep", str(toml), "--out", str(tmp_path / "out"))
    assert proc.returncode == 1
    assert "FAILED buggy.attention-" in proc.stdout and "IndexError" in proc.stdout


def test_labels_are_unique_per_path_and_seed(tmp_path):
    a = Cell(f"{tmp_path}/a/attn.py:attn", "eager", parse_shape(SMALL), "float32", "cpu")
    b = Cell(f"{tmp_path}/b/attn.py:attn", "eager", parse_shape(SMALL), "float32", "cpu")
    seeded = Cell("naive", "eager", parse_shape(SMALL), "float32", "cpu", seed=3)
    assert a.label() != b.label() and a.label().startswith("attn.attn-")
    assert seeded.label().endswith("__seed3")
    assert Cell("naive", "eager", parse_shape(SMALL), "float32", "cpu").label().endswith("__cpu")


def test_unwritable_places_and_bad_timeouts_are_one_line(tmp_path, cli, monkeypatch):
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    args = ["run", "--variant", "naive", "--mode", "eager", "--shape", SMALL, "--device", "cpu"]
    proc = cli(*args, "--out", str(blocker / "runs"))
    assert proc.returncode == 2 and "output directory" in proc.stderr and "OUT=" in proc.stderr
    proc = cli(*args, "--out", str(tmp_path / "o"), env={"COMPILEKIT_CACHE": str(blocker / "c")})
    assert proc.returncode == 2 and "COMPILEKIT_CACHE" in proc.stderr
    proc = cli(*args, "--out", str(tmp_path / "o"), "--timeout", "-5")
    assert proc.returncode == 2 and "positive" in proc.stderr
    for p in (proc,):
        assert len(p.stderr.strip().splitlines()) == 1 and "Traceback" not in p.stderr
    from compilekit.model import store
    from compilekit.model.errors import UserError

    monkeypatch.setattr(store, "free_bytes", lambda directory: 10 * 2**20)
    with pytest.raises(UserError, match="10 MiB free"):
        store.check_writable(str(tmp_path / "full"), "output directory", "choose another")
    assert not [f for f in os.listdir(tmp_path / "full") if "probe" in f or ".tmp" in f]
    # a disk that fills as the probe is written: the hint is to free space, and no probe stays
    import errno
    import io

    class Full(io.StringIO):
        def write(self, text):
            raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(store.os, "fdopen", lambda fd, mode: (os.close(fd), Full())[1])
    with pytest.raises(UserError, match="No space left on device.*free space on its disk, or"):
        store.check_writable(str(tmp_path / "filling"), "output directory", "choose another")
    assert os.listdir(tmp_path / "filling") == []


def test_exit_at_import_is_one_line(tmp_path, cli):
    user = _file(
        tmp_path, "quits.py", "import sys\nsys.exit(3)\ndef attention(q, k, v):\n    return q\n"
    )
    proc = cli("run", "--variant", f"{user}:attention", "--mode", "eager", "--device", "cpu")
    assert proc.returncode == 2 and "called sys.exit(3) while being imported" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "text, needle",
    [
        (
            'variants = ["naive"]\nmodes = ["eager"]\nshapes = [1024]\n',
            "'shapes' must be a list of strings",
        ),
        (
            'variants = [1, 2]\nmodes = ["eager"]\nshapes = ["1x2x64x16"]\n',
            "'variants' must be a list of strings",
        ),
        (
            'variants = ["naive"]\nmodes = ["eager"]\nshapes = ["1x2x64x16"]\ndtype = 5\n',
            "'dtype' must be str",
        ),
        (
            'variants = ["naive"]\nmodes = ["eager"]\nshapes = ["1x2x64x16"]\ntimeout_s = -1\n',
            "positive",
        ),
        (
            'variants = ["naive"]\nmodes = ["eager"]\nshapes = ["1x2x64x16"]\nseed = true\n',
            "'seed' must be int",
        ),
        (
            'name = "../up"\nvariants = ["naive"]\nmodes = ["eager"]\nshapes = ["1x2x64x16"]\n',
            "must be letters",
        ),
        (
            'variants = ["naive"]\nmodes = ["eager"]\nshapes = ["1x1x999999999999x1"]\n',
            "too large",
        ),
    ],
)
def test_toml_values_of_the_wrong_kind(text, needle, tmp_path, cli):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    proc = cli("sweep", str(path), "--out", str(tmp_path / "out"))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert needle in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_relative_variant_paths_resolve_against_the_toml(tmp_path):
    from compilekit.userexperiment import load_experiment

    (tmp_path / "sub").mkdir()
    _file(tmp_path / "sub", "mine.py", "def attention(q, k, v):\n    return q\n")
    toml = tmp_path / "sub" / "e.toml"
    toml.write_text(
        'variants = ["mine.py:attention"]\nmodes = ["eager"]\nshapes = ["1x2x64x16"]\n'
    )
    experiment = load_experiment(str(toml))  # the cwd is not tmp_path/sub
    assert experiment.cells[0].variant == f"{tmp_path}/sub/mine.py:attention"


def test_log_is_capped(tmp_path):
    from compilekit.model.store import cap_log

    log = tmp_path / "log.txt"
    log.write_bytes(b"start\n" + b"x" * (3 * 2**20) + b"\nthe end\n")
    cap_log(str(log))
    text = log.read_bytes()
    assert len(text) < 1.1 * 2**20 and text.startswith(b"start") and text.endswith(b"the end\n")
    assert b"bytes cut by compilekit" in text


def test_makefile_passes_quotes_through(tmp_path, cache_root):
    weird = tmp_path / "it's here.py"
    weird.write_text("def attention(q, k, v):\n    return q\n")
    proc = subprocess.run(
        [
            "make",
            "-s",
            "experiment",
            f"VARIANT={weird}:attention",
            "MODE=eager",
            "DEVICE=cpu",
            f"SHAPE={SMALL}",
            f"OUT={tmp_path / 'runs'}",
            f"PYTHON={sys.executable}",
        ],
        cwd=ROOT,
        env={**os.environ, "COMPILEKIT_CACHE": cache_root},
        capture_output=True,
        text=True,
    )
    # a quote and a space in the path reach compilekit intact: the cell runs
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "self-consistent" in proc.stdout and "run directory:" in proc.stdout


def test_writable_check_holds_when_a_sweeps_cells_run_it_at_once(tmp_path):
    """A sweep launches its cells from threads of one process: their directory checks run side
    by side and must not trip over each other (a probe file named by PID alone once made the
    first cells of an H200 sweep fail with 'not writable')."""
    import threading

    from compilekit.model import store

    errors = []

    def check():
        for _ in range(200):
            try:
                store.check_writable(str(tmp_path / "out"), "output directory", "choose another")
            except Exception as exc:  # noqa: BLE001 (collected for the assertion)
                errors.append(exc)

    threads = [threading.Thread(target=check) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[:3]
    assert os.listdir(tmp_path / "out") == []


def test_a_measure_process_imports_before_it_takes_the_gpu(cli, tmp_path):
    """The GPU lock (file-based, so it works on the CPU too) is taken after the imports and
    Inductor's settings, which are CPU work: the GPU's current cell need not wait for them.
    steps_s keeps the order in which the process reached each step."""
    from compilekit.model import result as results_mod
    from tests.conftest import SMALL_SHAPE

    lock = tmp_path / "gpu0.lock"
    out = tmp_path / "out"
    proc = cli(
        *("run", "--variant", "naive", "--mode", "default", "--device", "cpu"),
        *("--shape", SMALL_SHAPE, "--out", str(out)),
        env={"COMPILEKIT_GPU_LOCK": str(lock)},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    (run_dir,) = [p for p in out.iterdir() if p.is_dir()]
    steps = list(results_mod.load(str(run_dir)).steps_s)
    assert lock.exists() and "gpu_lock_wait_s" in steps, steps
    order = [steps.index(s) for s in ("imports", "inductor_import_and_settings")]
    assert max(order) < steps.index("gpu_lock_wait_s") < steps.index("device_init"), steps


def _staged(tmp_path, name, **fields):
    from compilekit.model.result import CellResult

    stage = tmp_path / name
    stage.mkdir()
    return CellResult("naive", "default", "1x2x64x32", "float32", "cpu", **fields), str(stage)


NOISY = dict(status="ok", compiled_ms=1.5, noisy=True, noise_note="p90 is 2.00x the fastest")


def test_a_noisy_timing_never_replaces_a_quiet_one_and_one_replaced_is_kept(tmp_path):
    from compilekit.launch import runner
    from compilekit.model.result import load

    run_dir = str(tmp_path / "cell")
    runner.place(*_staged(tmp_path, "first", **NOISY), run_dir)
    # a quiet run replaces the noisy one, which stays in attempts/ as evidence
    runner.place(*_staged(tmp_path, "quiet", status="ok", compiled_ms=1.0), run_dir)
    kept = load(run_dir)
    assert kept.compiled_ms == 1.0 and [a["status"] for a in kept.attempts] == ["noisy"]
    assert load(os.path.join(run_dir, kept.attempts[0]["dir"])).compiled_ms == 1.5
    # a noisy rerun does not replace the quiet one: it goes to attempts/ beside it
    rerun, stage = _staged(tmp_path, "rerun", **(NOISY | {"compiled_ms": 1.7}))
    assert "attempts" in runner.place(rerun, stage, run_dir).run_dir
    kept = load(run_dir)
    assert kept.compiled_ms == 1.0 and [a["compiled_ms"] for a in kept.attempts] == [1.5, 1.7]
    for a in kept.attempts:
        assert load(os.path.join(run_dir, a["dir"])).noisy
    from compilekit.report.cellview import attempts_text

    assert attempts_text(kept) == (
        "kept in attempts/ beside this run: 2 noisy timing(s) (the last: 1.7 ms, p90 is 2.00x "
        "the fastest)"
    )


def test_a_rerun_of_other_code_takes_the_place_of_a_quiet_run_noisy_or_failed(tmp_path):
    """A quiet run of the variant's old source says nothing of its new source: a rerun after
    the code changed takes the place even when its timing is noisy, or when it failed (the
    user's new code may be what fails), and the old run stays in attempts/."""
    from compilekit.launch import runner
    from compilekit.model.result import load
    from compilekit.report.cellview import attempts_text

    old, new = ({"variant": {"variants/naive.py": tag}, "passes": {}} for tag in ("a", "b"))
    run_dir = str(tmp_path / "cell")
    runner.place(*_staged(tmp_path, "old", status="ok", compiled_ms=1.0, code_sources=old),
                 run_dir)  # fmt: skip
    runner.place(*_staged(tmp_path, "new", **NOISY, code_sources=new), run_dir)
    kept = load(run_dir)
    assert kept.compiled_ms == 1.5 and kept.code_sources == new
    assert [a["status"] for a in kept.attempts] == ["other code"]
    assert load(os.path.join(run_dir, kept.attempts[0]["dir"])).compiled_ms == 1.0
    assert "1 run(s) of other code (the last: 1 ms, measured before" in attempts_text(kept)
    # the same code again, quiet: it replaces the noisy run as before, evidence carried along
    runner.place(*_staged(tmp_path, "quiet", status="ok", compiled_ms=1.2, code_sources=new),
                 run_dir)  # fmt: skip
    kept = load(run_dir)
    assert kept.compiled_ms == 1.2
    assert sorted(a["status"] for a in kept.attempts) == ["noisy", "other code"]
    failed = dict(status="failed", reason="CompilationError", code_sources=old)
    runner.place(*_staged(tmp_path, "broken", **failed), run_dir)
    kept = load(run_dir)
    assert kept.status == "failed" and kept.attempts[-1]["status"] == "other code"
    assert load(os.path.join(run_dir, kept.attempts[-1]["dir"])).compiled_ms == 1.2


def test_a_parallel_sweep_times_its_noisy_cells_again_alone(tmp_path, monkeypatch):
    """Two cell processes per GPU: a cell whose timing was noisy is timed once more at the end,
    alone; the quiet second timing is kept, the first stays in attempts/."""
    import io
    import threading

    from compilekit.launch import runner, sweep
    from compilekit.measure import locks
    from compilekit.model.result import load
    from compilekit.userexperiment import load_experiment

    path = tmp_path / "two.toml"
    path.write_text(
        'variants = ["naive", "sdpa"]\nmodes = ["eager"]\nshapes = ["1x2x64x32"]\ndevice = "cuda"\n'
    )
    monkeypatch.setattr(locks, "core_plan", lambda gpus: {"0": {}})  # two processes at once
    experiment = load_experiment(str(path))
    runs, lock = [], threading.Lock()

    def fake_launch(cell, out_dir, **_):
        with lock:  # the sweep's two workers call this at once
            runs.append(cell.variant)
            n, noisy = len(runs), cell.variant == "naive" and runs.count("naive") == 1
        result, stage = _staged(
            tmp_path, f"stage{n}", **(NOISY if noisy else {"status": "ok", "compiled_ms": 1.0})
        )
        (tmp_path / f"stage{n}" / "kernels.json").write_text("{}")
        return runner.place(result, stage, os.path.join(out_dir, cell.label()))

    monkeypatch.setattr(sweep, "launch_or_record", fake_launch)
    log = io.StringIO()
    out = str(tmp_path / "out")
    ordered = sweep.run_sweep(experiment, out, gpus=["0"], per_gpu=2, log=log)
    assert sorted(runs) == ["naive", "naive", "sdpa"]
    naive = next(r for r in ordered if r.variant == "naive")
    assert naive.compiled_ms == 1.0 and not naive.noisy and len(naive.attempts) == 1
    assert "1 noisy timing(s): each timed again, alone" in log.getvalue()
    assert "1.500 ms (noisy), again ok 1.000 ms; kept ok 1.000 ms" in log.getvalue()
    label = next(c.label() for c in experiment.cells if c.variant == "naive")
    assert load(os.path.join(out, label)).compiled_ms == 1.0


OOM_BESIDE_OTHERS = (
    "CUDA out of memory. Tried to allocate 64.00 GiB. GPU 0 has a total capacity of 139.80 GiB "
    "of which 12.73 GiB is free. Process 513 has 4.98 GiB memory in use. Process 3017 has 53.48 "
    "GiB memory in use. Including non-PyTorch memory, this process has 67.29 GiB memory in use."
)


def test_out_of_memory_beside_other_processes_says_to_run_it_alone():
    """torch's message names the other processes on the GPU: a cell that would fit alone is not
    told only to shrink its shape."""
    import torch

    from compilekit.measure.failures import classify

    ended = classify(torch.OutOfMemoryError(OOM_BESIDE_OTHERS), "4x16x16384x64")
    assert ended.status == "failed"
    assert ended.reason == (
        "out of memory allocating 64.00 GiB at shape 4x16x16384x64: other processes held "
        "58.5 GiB of the GPU: run it alone, or try a smaller shape"
    )
    alone = classify(torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"), "s")
    assert alone.reason == "out of memory allocating 2.00 GiB at shape s: try a smaller shape"


# torch's warnings as SDPA's efficient backend, pinned, refuses a GQA decode shape on a GPU
SDPA_GQA_WARNINGS = [
    "Memory efficient kernel not used because: (Triggered internally at "
    "/pytorch/aten/src/ATen/native/transformers/cuda/sdp_utils.cpp:915.)",
    "For dense inputs, both fused kernels require query, key and value to have the same "
    "num_heads. Query.sizes(1): 32, Key.sizes(1): 8, Value.sizes(1): 8 instead. To broadcast "
    "dense inputs, try using unsqueeze and expand_to before passing them into the kernel. "
    "(Triggered internally at /pytorch/aten/src/ATen/native/transformers/sdp_utils_cpp.h:402.)",
]


def test_a_backends_refusal_is_one_sentence_and_of_gqa_says_so():
    from compilekit.measure.failures import refusal
    from compilekit.model.spec import parse_shape

    gqa, dense = parse_shape("1x32g8x1x8192x128"), parse_shape("1x32x1x8192x128")
    said = refusal("No available kernel. Aborting execution.", SDPA_GQA_WARNINGS, gqa)
    assert said == (
        "this backend takes no GQA here (32 query heads over 8 K/V heads): choose sdpa or "
        "sdpa-gqa, where SDPA picks a backend that does"
    )
    other = ["Flash attention requires q,k,v to have the same last dimension (Triggered "
             "internally at x.cpp:1.)"] * 2  # fmt: skip
    said = refusal("No available kernel. Aborting execution.", other, dense)
    assert said == (
        "No available kernel. Aborting execution.; Flash attention requires q,k,v to have the "
        "same last dimension"
    )


# the driver's own words, as torch.AcceleratorError carried them on the H200 when a cell made
# its inputs while a neighbour's eager flex call held 128 GiB (2026-12-01)
DRIVER_OOM = (
    "CUDA error: out of memory\nSearch for `cudaErrorMemoryAllocation' in https://docs.nvidia.com"
    "/cuda/cuda-runtime-api/group__CUDART__TYPES.html for more information."
)


def test_out_of_memory_outside_the_eager_probe_is_named_as_such():
    """A cell process that runs out of memory making its inputs or compiling gets the same
    out-of-memory reason as the eager probe (so a sweep runs it again alone), not a bare
    "RuntimeError: CUDA error" that reads like a bug; any other error keeps torch's words."""
    from compilekit.measure.failures import failure_outside_probe, record_end
    from compilekit.model.result import CellResult
    from compilekit.model.spec import Cell, parse_shape

    cell = Cell("flex", "default", parse_shape("4x16x2048x128"), "bfloat16", "cuda")
    ended = failure_outside_probe(cell, RuntimeError(DRIVER_OOM))
    assert (ended.status, ended.out_of_memory) == ("failed", True)
    assert ended.reason == (
        "out of memory at shape 4x16x2048x128: RuntimeError: CUDA error: out of memory; run it "
        "alone, or try a smaller shape"
    )
    record = CellResult("flex", "default", "4x16x2048x128", "bfloat16", "cuda")
    record_end(record, ended)  # the record says so in a field, not only in words
    assert (record.status, record.failure) == ("failed", "out_of_memory")
    ended = failure_outside_probe(cell, KeyError("q"))
    assert (ended.status, ended.reason) == ("failed", "KeyError: 'q' (traceback in log.txt)")
    record_end(record, ended)
    assert record.failure == "error"


def test_an_eager_probe_out_of_memory_lets_go_of_what_the_failed_call_held():
    """A compiled cell whose eager call ran out of memory goes on compiled: what that call
    allocated is freed first (on the H200, torch's error kept flex's 129 GiB of scores alive
    through its traceback, and the float64 reference then ran out of memory)."""
    import types
    import weakref

    import torch

    from compilekit.measure.calls import eager_first
    from compilekit.model.spec import Cell, parse_shape

    held = []

    def attention(q, k, v):
        scores = torch.empty(1000)  # what flex's eager math path holds when it runs out
        held.append(weakref.ref(scores))
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 64.00 GiB")

    cell = Cell("flex", "default", parse_shape("1x1x8x8"), "float32", "cpu")
    q = torch.zeros(1, 1, 8, 8)
    out, note = eager_first(types.SimpleNamespace(attention=attention), (q, q, q), cell)
    assert out is None and note.startswith("eager could not run ('flex' failed on cpu")
    assert held[0]() is None, "the failed eager call's tensors are still alive"


@pytest.mark.parametrize("where", ["eager probe", "outside the probe"])
def test_a_parallel_sweep_runs_a_cell_out_of_memory_again_alone(tmp_path, monkeypatch, where):
    """Two cell processes per GPU: a cell that ran out of memory beside the other, in its eager
    probe or anywhere else in its processes, is run once more at the end, alone, and the run
    that fit is kept."""
    import io
    import threading

    from compilekit.launch import runner, sweep
    from compilekit.measure import locks
    from compilekit.measure.failures import classify, failure_outside_probe
    from compilekit.userexperiment import load_experiment

    path = tmp_path / "two.toml"
    path.write_text(
        'variants = ["naive", "sdpa"]\nmodes = ["eager"]\nshapes = ["1x2x64x32"]\ndevice = "cuda"\n'
    )
    monkeypatch.setattr(locks, "core_plan", lambda gpus: {"0": {}})  # two processes at once
    experiment = load_experiment(str(path))
    runs, lock = [], threading.Lock()
    import torch

    # as the cell records it: in the probe, what it was doing, then classify's words
    ended = classify(torch.OutOfMemoryError(OOM_BESIDE_OTHERS), "1x2x64x32")
    if where == "outside the probe":
        sdpa = next(c for c in experiment.cells if c.variant == "sdpa")
        ended = failure_outside_probe(sdpa, RuntimeError(DRIVER_OOM))

    def fake_launch(cell, out_dir, **_):
        with lock:
            runs.append(cell.variant)
            n, short = len(runs), cell.variant == "sdpa" and runs.count("sdpa") == 1
        fields = {"status": "ok"}
        if short:  # as failures.record_end records it
            fields = {"status": "failed", "reason": ended.reason, "failure": "out_of_memory"}
        result, stage = _staged(
            tmp_path, f"stage{n}", compiled_ms=None if short else 1.0, **fields
        )
        (tmp_path / f"stage{n}" / "kernels.json").write_text("{}")
        return runner.place(result, stage, os.path.join(out_dir, cell.label()))

    monkeypatch.setattr(sweep, "launch_or_record", fake_launch)
    log = io.StringIO()
    ordered = sweep.run_sweep(experiment, str(tmp_path / "out"), gpus=["0"], per_gpu=2, log=log)
    assert sorted(runs) == ["naive", "sdpa", "sdpa"]
    assert [r.status for r in ordered] == ["ok", "ok"]
    assert "1 cell(s) out of memory beside other cell processes: each run again" in log.getvalue()
    assert "out of memory, again ok 1.000 ms; kept ok 1.000 ms" in log.getvalue()
    # alone, in a sweep of one process per GPU, it is not run twice
    runs.clear()
    sweep.run_sweep(experiment, str(tmp_path / "out1"), gpus=["0"], per_gpu=1, log=io.StringIO())
    assert sorted(runs) == ["naive", "sdpa"]


def test_a_run_cleans_what_an_interrupted_run_of_its_cell_left(tmp_path, cli):
    out = tmp_path / "out"
    label = Cell("naive", "eager", parse_shape(SMALL), "float32", "cpu").label()
    dead = subprocess.Popen([sys.executable, "-c", ""])
    dead.wait()  # a PID no process holds now
    stale, other = out / f"{label}.tmp-{dead.pid}", out / f"another.tmp-{dead.pid}"
    for folder in (stale, other):
        folder.mkdir(parents=True)
    mine = out / f"{label}.tmp-{os.getpid()}"  # a live process's: it may still be writing
    mine.mkdir()
    proc = cli("run", "--variant", "naive", "--mode", "eager", "--device", "cpu",
               "--shape", SMALL, "--out", str(out))  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert not stale.exists() and other.exists() and mine.exists()
    assert (out / label / "result.json").is_file()
