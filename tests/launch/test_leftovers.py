"""No process a cell starts outlives it: helpers in the cell's session, and in sessions of
their own, end when the cell's run or sweep ends."""

import os
import subprocess
import sys
import time
import uuid

from tests.launch.test_faults import _cmdlines_with

# started on the first call of each process (the timed calls would start hundreds)
HELPERS = """
import subprocess, sys

STARTED = []

def attention(q, k, v):
    if not STARTED:
        STARTED.append(True)
        for own_session in (False, True):
            subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)", {marker!r}],
                             start_new_session=own_session)
    return q
"""


def _no_helper_left(marker):
    deadline = time.time() + 10  # SIGKILL is delivered at once; reaping may take a moment
    while time.time() < deadline and _cmdlines_with(marker):
        time.sleep(0.1)
    left = _cmdlines_with(marker)
    for pid in left:  # never leave them to the machine
        os.kill(pid, 9)
    return not left


def test_helpers_a_cell_starts_end_with_its_run_and_its_sweep(tmp_path, cli):
    for command in ("run", "sweep"):
        marker = f"compilekit-helper-{uuid.uuid4().hex}"
        (tmp_path / f"{command}.py").write_text(HELPERS.format(marker=marker))
        variant = f"{tmp_path / command}.py:attention"
        if command == "run":
            args = ["run", "--variant", variant, "--mode", "eager", "--device", "cpu",
                    "--shape", "1x2x16x8", "--out", str(tmp_path / "runs")]  # fmt: skip
        else:
            (tmp_path / "e.toml").write_text(
                f'variants = ["{variant}"]\nmodes = ["eager"]\nshapes = ["1x2x16x8"]\n'
                'device = "cpu"\n'
            )
            args = ["sweep", str(tmp_path / "e.toml"), "--out", str(tmp_path / "sweep")]
        proc = cli(*args)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert _no_helper_left(marker), f"{command} left helpers running"


def test_the_reaper_never_takes_a_running_phase_or_an_unmarked_child(monkeypatch):
    from compilekit.launch import reaper

    reaper.become_subreaper()
    marked = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)"],
        env={**os.environ, reaper.MARK: str(os.getpid())},
    )
    plain = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        time.sleep(0.3)  # both have exec'd, with their environments
        assert reaper.orphans({marked.pid}) == []  # a running phase process
        assert reaper.orphans(set()) == [marked.pid]  # the unmarked child is not the cell's
    finally:
        for p in (marked, plain):
            p.kill()
            p.wait()


def test_helpers_a_file_starts_as_the_command_line_checks_it_end_with_the_command(tmp_path):
    """The front doors import a user's variant (or pass) file to check it: what it starts at
    import, holding the command's stdout, once kept `compilekit run ... | tail` waiting."""
    marker = f"compilekit-helper-{uuid.uuid4().hex}"
    (tmp_path / "starts.py").write_text(
        "import subprocess, sys\n"
        "for own_session in (False, True):\n"
        "    subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)', "
        f"{marker!r}], start_new_session=own_session)\n"
    )
    variant = f"{tmp_path / 'starts.py'}:attention"  # no such function: refused after import
    (tmp_path / "e.toml").write_text(
        f'variants = ["{variant}"]\nmodes = ["eager"]\nshapes = ["1x2x16x8"]\ndevice = "cpu"\n'
    )
    for args in (
        ["run", "--variant", variant, "--mode", "eager", "--device", "cpu"],
        ["run", "--variant", "naive", "--mode", "default", "--device", "cpu", "--pass", variant],
        ["sweep", str(tmp_path / "e.toml"), "--out", str(tmp_path / "sweep")],
    ):
        try:  # the pipe of its stdout ends when every process holding it has
            proc = subprocess.run(
                [sys.executable, "-m", "compilekit", *args],
                capture_output=True, text=True, timeout=60,
            )  # fmt: skip
        finally:
            left = _no_helper_left(marker)
        assert proc.returncode == 2 and "attention" in proc.stderr, proc.stderr
        assert left, f"{args[0]} left the file's helpers running"
