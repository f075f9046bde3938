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
    start = (0.0, (1000, 10), {"1": 100, "2": 50, "4": 7})
    end = (1.0, (1300, 30), {"1": 200, "2": 200, "3": 30, "4": 12})
    use = cpuwatch.use_between(start, end, "1", 100, name=lambda pid: f"proc{pid}")
    assert use.others_cores == pytest.approx(2.0) and use.steal_cores == pytest.approx(0.2)
    assert use.top == [("proc2", pytest.approx(1.5)), ("proc3", pytest.approx(0.3))]
    assert use.tick_cores == pytest.approx(0.01)
    assert cpuwatch.use_between(start, (0.01,) + end[1:], "1", 100) is None  # under MIN_WALL_S


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
    assert "other processes used 2.3 cores (python3 -m compilekit.launch.cell cold 2.1)" in noise_note(
        [quiet], 0.5, 8, busy
    )
    assert noise_note([quiet], 0.5, 16, busy) is None  # 2.3 of 16 cores: the timer has its own
    assert "1.5 stolen by the hypervisor" in noise_note([quiet], 0.5, 2, stolen)
    assert noise_note([quiet], 0.5, 2, idle) is None
    # a wide spread says what ran meanwhile, even if little did
    assert noise_note([wide], 0.5, 2, idle).endswith("meanwhile other processes used 0.2 cores")
