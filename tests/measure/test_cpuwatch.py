"""cpuwatch: what else used the CPU while a cell was timed (Linux /proc), and how a cell's
noise note says it."""

import subprocess
import sys
import time

import pytest

from compilekit.measure import cpuwatch

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


@linux_only
def test_another_process_spinning_is_counted_and_named():
    marker = "cpuwatch_spinner_marker"
    code = f"# {marker}\nwhile True: pass"
    with cpuwatch.watch() as watched:
        spinner = subprocess.Popen([sys.executable, "-c", code])
        time.sleep(1.0)
    spinner.kill()
    spinner.wait()
    use = watched.use
    assert use is not None and use.others_cores >= 0.5, use
    assert any(marker in name for name, _ in use.top), use.top
    assert "other processes used" in use.text() and "\n" not in use.text()  # its -c script


def test_this_process_is_left_out_and_the_busiest_others_named():
    """Snapshots 1 s apart at 100 ticks/s: the machine busy 300 ticks (3 cores), 100 of them
    this process's (pid 1): others 2 cores, the busiest first, a process started meanwhile
    counted whole, one under NAMED_CORES unnamed; 20 ticks stolen (0.2 cores)."""
    start = (0.0, (1000, 10), {"1": (100, 0), "2": (50, 0), "4": (7, 0)})
    end = (1.0, (1300, 30), {"1": (200, 0), "2": (200, 1), "3": (30, 0), "4": (12, 0)})
    use = cpuwatch.use_between(start, end, "1", 100, name=lambda pid: f"proc{pid}")
    assert use.others_cores == pytest.approx(2.0) and use.steal_cores == pytest.approx(0.2)
    assert use.top == [("proc2", pytest.approx(1.5)), ("proc3", pytest.approx(0.3))]
    assert use.tick_cores == pytest.approx(0.01)
    assert cpuwatch.use_between(start, (0.01,) + end[1:], "1", 100) is None  # under MIN_WALL_S


def _fake_proc(root, cpu0, cpu1, processes):
    """A /proc with two CPUs (busy user ticks each) and processes {pid: (ticks, last CPU)}."""
    root.mkdir(exist_ok=True)
    total = cpu0 + cpu1
    (root / "stat").write_text(
        f"cpu  {total} 0 0 900 0 0 0 0\ncpu0 {cpu0} 0 0 450 0 0 0 0\ncpu1 {cpu1} 0 0 450 0 0 0 0\n"
    )
    for pid, (ticks, cpu) in processes.items():
        (root / pid).mkdir(exist_ok=True)
        fields = ["S"] + ["0"] * 10 + [str(ticks), "0"] + ["0"] * 23 + [str(cpu)]
        (root / pid / "stat").write_text(f"{pid} (python3) " + " ".join(fields))


def test_watching_some_cpus_counts_only_what_ran_there(monkeypatch, tmp_path):
    """A sweep's timing thread has CPU 1 to itself: a compile busy on CPU 0 is not counted or
    named, a process that ran on CPU 1 is, one that moved onto CPU 1 meanwhile is named for
    its ticks in the block (not its whole life), and this process is left out wherever it ran."""
    import os

    me = str(os.getpid())
    monkeypatch.setattr(cpuwatch, "PROC", str(tmp_path))
    _fake_proc(tmp_path, 1000, 500, {me: (100, 0), "2": (50, 0), "3": (10, 1), "5": (900, 0)})
    start = cpuwatch.snapshot({1})
    _fake_proc(tmp_path, 1200, 560, {me: (110, 0), "2": (250, 0), "3": (60, 1), "5": (910, 1)})
    end = cpuwatch.snapshot({1})
    use = cpuwatch.use_between((0.0,) + start[1:], (1.0,) + end[1:], me, 100, str, {1})
    assert use.others_cores == pytest.approx(0.5)  # CPU 1: 60 ticks, less my own 10
    assert use.top == [("3", pytest.approx(0.5)), ("5", pytest.approx(0.1))]
    assert use.cores == [1] and "cores of CPUs 1" in use.text()
    whole = cpuwatch.use_between(
        (0.0,) + cpuwatch.snapshot()[1:], (1.0,) + cpuwatch.snapshot()[1:], me, 100, str
    )
    assert whole.others_cores == 0.0  # no change between two reads of the same files
    assert cpuwatch._machine_ticks() == (1760, 0) and cpuwatch._machine_ticks({0}) == (1200, 0)
    # over the whole machine, every process that ran is named (2: 200 ticks, 3: 50, 5: 10)
    assert [
        n for n, _ in cpuwatch.use_between((0.0,) + start[1:], (1.0,) + end[1:], me, 100, str).top
    ] == ["2", "3", "5"]


def test_a_short_block_is_read_over_the_minimum_wall_and_no_proc_says_nothing(
    monkeypatch, tmp_path
):
    """A CPU cell's timed calls can take under MIN_WALL_S, where one stray clock tick would
    read as many cores: such a block is read over MIN_WALL_S from its start, not left out."""
    with cpuwatch.watch() as watched:
        pass
    assert watched.use is not None and watched.use.wall_s >= cpuwatch.MIN_WALL_S
    monkeypatch.setattr(cpuwatch, "PROC", str(tmp_path / "no-proc"))
    with cpuwatch.watch() as watched:
        time.sleep(cpuwatch.MIN_WALL_S + 0.05)
    assert watched.use is None


def test_noise_note_says_what_else_ran():
    from compilekit.measure.steady import noise_note

    quiet, wide = {"min_ms": 1.0, "p90_ms": 1.1}, {"min_ms": 1.0, "p90_ms": 2.0}
    busy = cpuwatch.CpuUse(2.0, 2.3, 0.0, [("python3 -m compilekit.launch.cell cold", 2.1)])
    idle = cpuwatch.CpuUse(2.0, 0.2, 0.0, [])
    stolen = cpuwatch.CpuUse(2.0, 0.1, 1.5, [])
    # other processes busy, a core or a quarter of the machine: disturbed even when the samples
    # look tight
    assert (
        "other processes used 2.3 cores (python3 -m compilekit.launch.cell cold 2.1)"
        in noise_note([quiet], 0.5, 8, busy)
    )
    assert noise_note([quiet], 0.5, 16, busy) is None  # 2.3 of 16 cores: the timer has its own
    assert "1.5 stolen by the hypervisor" in noise_note([quiet], 0.5, 2, stolen)
    assert noise_note([quiet], 0.5, 2, idle) is None
    # a wide spread says what ran meanwhile, even if little did
    assert noise_note([wide], 0.5, 2, idle).endswith("meanwhile other processes used 0.2 cores")
