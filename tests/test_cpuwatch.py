"""cpuwatch: what else used the CPU while a cell was timed (Linux /proc), and how a cell's
noise note says it."""

import subprocess
import sys
import time

import pytest

from compilekit import cpuwatch

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


def _spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


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
    assert "other processes used" in use.text()


@linux_only
def test_this_process_own_work_is_not_counted_as_others():
    with cpuwatch.watch() as watched:
        _spin(0.6)
    assert watched.use is not None and watched.use.others_cores < 0.5, watched.use


def test_too_short_a_block_or_no_proc_says_nothing(monkeypatch, tmp_path):
    with cpuwatch.watch() as watched:
        pass  # far under MIN_WALL_S: one stray clock tick would read as many cores
    assert watched.use is None
    monkeypatch.setattr(cpuwatch, "PROC", str(tmp_path / "no-proc"))
    with cpuwatch.watch() as watched:
        time.sleep(cpuwatch.MIN_WALL_S + 0.05)
    assert watched.use is None


def test_noise_note_says_what_else_ran():
    from compilekit.cell import noise_note

    quiet, wide = {"min_ms": 1.0, "p90_ms": 1.1}, {"min_ms": 1.0, "p90_ms": 2.0}
    busy = cpuwatch.CpuUse(2.0, 2.3, 0.0, [("python3 -m compilekit.cell cold", 2.1)])
    idle = cpuwatch.CpuUse(2.0, 0.2, 0.0, [])
    stolen = cpuwatch.CpuUse(2.0, 0.1, 1.5, [])
    # other processes busy: disturbed even when the samples look tight
    assert "other processes used 2.3 cores (python3 -m compilekit.cell cold 2.1)" in noise_note(
        [quiet], 0.5, 16, busy
    )
    assert "1.5 stolen by the hypervisor" in noise_note([quiet], 0.5, 16, stolen)
    assert noise_note([quiet], 0.5, 16, idle) is None
    # a wide spread says what ran meanwhile, even if little did
    assert noise_note([wide], 0.5, 16, idle).endswith("meanwhile other processes used 0.2 cores")
