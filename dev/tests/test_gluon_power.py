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


def test_the_table_sets_each_loop_beside_its_own_samples_and_bursts():
    from compilekit.model.spec import parse_shape
    from compilekit.variants.masks import causal_flops

    fns = {"mine": None, "theirs": None}
    segments = [("1x1x256x64", "mine", 2.0, 10.0, 12.0), ("1x1x256x64", "theirs", 4.0, 20.0, 22.0)]
    bursts = [("1x1x256x64", "mine", ms) for ms in (0.6, 0.5, 0.4)]
    samples = [(11.0, 1500.0, 700.0), (13.0, 1900.0, 300.0), (21.0, 1800.0, 650.0)]
    header, mine, theirs = gluon_power.report(fns, segments, bursts, samples)
    flops = causal_flops(parse_shape("1x1x256x64"))
    assert mine.split()[2:10] == [
        "2.0000", f"{flops / 2.0 / 1e9:.1f}", "1500", "700.0", "3.000", "1400.0", "0.5000",
        f"{flops / 0.5 / 1e9:.1f}",
    ]  # fmt: skip
    assert theirs.split()[4:5] == ["1800"] and theirs.split()[8] == "nan"  # no bursts of its own


def test_a_negative_burst_gets_one_line_and_exit_2():
    done = subprocess.run(
        [sys.executable, gluon_power.__file__, "--burst", "-1"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "gluon_power.py: give --burst 0 or more, --rounds 1 or more and --seconds above 0"
    ]
