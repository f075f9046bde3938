"""dev/gluon_power.py: nvidia-smi's samples read back as numbers, and a machine without a
Hopper GPU told so in one line. `python -m pytest dev/tests`."""

import subprocess
import sys

import gluon_power
import pytest


def test_samples_are_read_as_seconds_megahertz_and_watts(tmp_path):
    csv = tmp_path / "samples.csv"
    csv.write_text(
        "2026/12/05 16:01:27.151, 1605 MHz, 564.16 W\n"
        "[Unknown Error]\n"
        "2026/12/05 16:01:27.555, 1530 MHz, 705.53 W\n"
    )
    (t0, mhz0, w0), (t1, mhz1, w1) = gluon_power.read_samples(str(csv))
    assert round(t1 - t0, 3) == 0.404
    assert (mhz0, w0, mhz1, w1) == (1605.0, 564.16, 1530.0, 705.53)


def test_without_a_hopper_gpu_it_says_so_in_one_line():
    import torch

    if torch.cuda.is_available() and torch.cuda.get_device_capability()[0] == 9:
        pytest.skip("a Hopper GPU is here: the script runs for real")
    done = subprocess.run(
        [sys.executable, gluon_power.__file__], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "gluon_power.py: needs a Hopper GPU (gluon-flash runs on sm90 only)"
    ]
