"""Parsing what users type: shapes, dtypes, devices, variants, modes."""

import pytest

from compilekit.cli import main
from compilekit.spec import UserError, parse_dtype, parse_shape


def test_shape_round_trip_and_flops():
    shape = parse_shape("8x16x1024x64")
    assert str(shape) == "8x16x1024x64"
    assert shape.causal_flop() == 4 * 8 * 16 * 1024 * 1024 * 64 / 2


@pytest.mark.parametrize("text", ["8x16x1024", "8x16x0x64", "axbxcxd", "8*16*1024*64", ""])
def test_malformed_shape_is_a_user_error(text):
    with pytest.raises(UserError, match="BxHxSxD"):
        parse_shape(text)


def test_dtype_spellings():
    assert parse_dtype("bf16") == "bfloat16"
    assert parse_dtype("FP32") == "float32"
    with pytest.raises(UserError, match="choose one of"):
        parse_dtype("int8")


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["--variant", "nope"], "unknown variant 'nope': choose one of naive"),
        (["--mode", "turbo"], "unknown mode 'turbo': choose one of eager, default"),
        (["--shape", "8x16x1024"], "malformed shape"),
        (["--dtype", "int4"], "unknown dtype"),
        (["--device", "tpu"], "unknown device"),
        (["--variant", "missing_file.py:attn"], "not found"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(argv, needle, capsys):
    assert main(["run", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err
    assert "\n" not in err and "Traceback" not in err


def test_cuda_without_gpu_names_the_fix(capsys):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    assert main(["run", "--device", "cuda"]) == 2
    assert "DEVICE=cpu" in capsys.readouterr().err


def test_missing_callable_lists_the_callables(tmp_path, capsys):
    path = tmp_path / "mine.py"
    path.write_text("def my_attention(q, k, v):\n    return q\n")
    assert main(["run", "--variant", f"{path}:nope"]) == 2
    err = capsys.readouterr().err
    assert "no callable 'nope'" in err and "my_attention" in err


def test_cuda_check_asks_torch_unless_the_answer_is_certain(monkeypatch):
    """A CPU build needs no torch import; a CUDA build whose driver probe fails asks torch
    (never a silent CPU fallback for DEVICE=auto on a GPU machine)."""
    import torch

    from compilekit import cli

    # read from torch/version.py without importing torch: the same answer torch gives
    assert cli._torch_cuda_build() is (torch.version.cuda is not None)
    monkeypatch.setattr(cli, "_torch_cuda_build", lambda: False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert cli.cuda_available() is False  # certain: a CPU build
    monkeypatch.setattr(cli, "_torch_cuda_build", lambda: True)
    monkeypatch.setattr(cli, "_driver_device_count", lambda: 0)
    assert cli.cuda_available() is True  # the probe saw nothing: torch decides
    monkeypatch.setattr(cli, "_driver_device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert cli.cuda_available() is True  # the driver reports devices


def test_every_committed_experiment_file_loads():
    """The experiments the README and experiments/h200_verify.sh name are valid specs."""
    import glob

    from compilekit.spec import load_experiment
    from tests.conftest import ROOT

    paths = sorted(glob.glob(f"{ROOT}/experiments/*.toml"))
    assert len(paths) >= 5, paths
    for path in paths:
        cells = load_experiment(path).cells
        assert cells, path


def test_the_h200_script_runs_its_phases_in_the_order_asked(tmp_path):
    """experiments/h200_verify.sh, with the GPU machine's commands stood in for: PHASES="D H"
    runs D, then H (a call that ends at its deadline in the first phase never reaches the
    second, so the order asked is the order run), a phase with its marker is not run again,
    an unknown phase is named, not silently skipped, phase A measures only the CELLS asked, a
    host-bound one with PAIRS pairs, and phase T runs bare against bare unpinned, then pinned,
    then pinned with one memory layout."""
    import os
    import shutil
    import subprocess

    from tests.conftest import ROOT

    bin_dir, out, res = tmp_path / "bin", tmp_path / "out", tmp_path / "res"
    bin_dir.mkdir()
    out.mkdir()
    # run from a copy: the script copies a checkout's .sweeps/ into /tmp, which a test must not
    (tmp_path / "experiments").mkdir()
    shutil.copy(os.path.join(ROOT, "experiments", "h200_verify.sh"), tmp_path / "experiments")
    log = tmp_path / "calls.log"
    (bin_dir / "nvidia-smi").write_text('#!/bin/sh\necho "GPU 0: stand-in"\n')
    # python3: each call logs its arguments (D's inline script reads stdin: `python3 -`)
    (bin_dir / "python3").write_text(f'#!/bin/sh\necho "$*" >> {log}\n')
    for f in bin_dir.iterdir():
        f.chmod(0o755)

    def run(phases, **extra):
        env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "OUT": str(out),
               "H200_RES": str(res), "PHASES": phases, "WAIT_S": "30", **extra}  # fmt: skip
        return subprocess.run(
            ["bash", "experiments/h200_verify.sh"], cwd=tmp_path, env=env, capture_output=True,
            text=True, timeout=60,
        )  # fmt: skip

    run("D H X")
    # D's inline compare, then H's script (`-m` calls: the wheels' install, reports of sweeps)
    calls = [line.split()[0] for line in log.read_text().splitlines() if line.split()]
    assert [c for c in calls if c != "-m"] == ["-", "experiments/host_bound_timing.py"], calls
    assert "no phase X" in (res / "phases.log").read_text()
    log.write_text("")
    run("H D")  # both done: neither runs again
    assert [line for line in log.read_text().splitlines() if "host_bound" in line] == []
    assert (out / "res.tgz").is_file()
    log.write_text("")
    run("A", CELLS="naive:reduce-overhead:1x4x128x64,sdpa:default:8x16x1024x64", PAIRS="12")
    measured = [ln for ln in log.read_text().splitlines() if " compilekit run " in ln + " "]
    assert [ln.split("--variant ")[1].split(" --out")[0] for ln in measured] == [
        "naive --mode reduce-overhead --shape 1x4x128x64",
        "sdpa --mode default --shape 8x16x1024x64",
    ], measured
    lines = log.read_text().splitlines()
    verified = [ln.split("/tmp/verify/")[1] for ln in lines if "compilekit verify" in ln]
    assert verified == [
        "naive__reduce-overhead__1x4x128x64__bfloat16__cuda --paired 12",
        "sdpa__default__8x16x1024x64__bfloat16__cuda --paired 0",
    ], verified
    log.write_text("")
    run("T", PAIRS="4")  # bare against bare by turns: free, then both on the last CPU
    spreads = [ln for ln in log.read_text().splitlines() if "turns_spread.py" in ln]
    assert [ln.split("--pairs ")[1] for ln in spreads] == [
        "4 --cpu free",
        f"4 --cpu {os.cpu_count() - 1}",
        f"4 --cpu {os.cpu_count() - 1}",
    ], spreads
