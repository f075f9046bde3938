"""Grad mode as an axis: a cell's calls run as a user's loop would, with nothing around them,
inside torch.no_grad() or inside torch.inference_mode(); the mode is recorded, named, and part
of the cell's name and cache."""

import json
import os
import subprocess
import sys

import pytest
import torch

import compilekit
from compilekit.model.errors import UserError
from tests.conftest import ROOT

# a model that writes down, at each call, the grad mode it ran under
RECORDER = """
import json, torch

class Recorder(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.ones(8))

    def forward(self, x):
        with open({log!r}, "a") as f:
            f.write(json.dumps([torch.is_grad_enabled(), torch.is_inference_mode_enabled()]) + "\\n")
        return x * self.w

def factory(shape, dtype, device):
    return Recorder(), (torch.randn(shape.batch, shape.seq, 8),)
"""


@pytest.mark.parametrize(
    "grad, seen, words",
    [
        ("inference", [False, True], "inside torch.inference_mode()"),
        ("no-grad", [False, False], "inside torch.no_grad()"),
    ],
)
def test_a_cells_calls_run_inside_its_grad_mode_and_the_cell_says_so(
    grad, seen, words, tmp_path, cache_root
):
    log = tmp_path / "modes.jsonl"
    (tmp_path / "recorder.py").write_text(RECORDER.format(log=str(log)))
    proc = subprocess.run(
        [sys.executable, "-m", "compilekit", "run", "--variant",
         f"{tmp_path / 'recorder.py'}:factory", "--mode", "eager", "--shape", "2x4",
         "--device", "cpu", "--grad", grad, "--out", str(tmp_path / "runs")],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
        env={**os.environ, "COMPILEKIT_CACHE": cache_root},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert words in proc.stdout.splitlines()[0]
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(calls) > 10 and all(c == seen for c in calls), calls[:3]
    (run_dir,) = (tmp_path / "runs").iterdir()
    assert run_dir.name.endswith(f"__grad-{grad}")
    assert compilekit.load(str(run_dir)).grad == grad
    if grad == "inference":  # verify's bare process calls it as the cell's processes did
        before = len(calls)
        subprocess.run(
            [sys.executable, "-m", "compilekit", "verify", str(run_dir), "--repeat", "1"],
            cwd=ROOT, capture_output=True, text=True, timeout=300,
            env={**os.environ, "COMPILEKIT_CACHE": cache_root},
        )  # fmt: skip
        calls = [json.loads(line) for line in log.read_text().splitlines()]
        assert len(calls) > before and all(c == seen for c in calls[before:])


def test_grads_is_an_axis_of_an_experiment_and_a_bad_one_is_one_line(tmp_path):
    from compilekit.userexperiment import load_experiment

    toml = tmp_path / "g.toml"
    toml.write_text(
        'variants = ["naive"]\nmodes = ["eager"]\nshapes = ["1x2x16x8"]\ndevice = "cpu"\n'
        'grads = ["off", "no-grad", "inference"]\n'
    )
    cells = load_experiment(str(toml)).cells
    assert [c.grad for c in cells] == ["off", "no-grad", "inference"]
    assert len({c.label() for c in cells}) == 3
    toml.write_text(toml.read_text().replace('"inference"]', '"training"]'))
    with pytest.raises(UserError, match="grad mode 'training': choose one of"):
        load_experiment(str(toml))
    # weights = "random" goes with checkpoints: refused in a matrix of built-ins, with its place
    toml.write_text(toml.read_text().replace('"training"]', '"inference"]\nweights = "random"'))
    with pytest.raises(UserError, match=r"g\.toml, top level: --weights random goes with"):
        load_experiment(str(toml))


def test_profile_runs_the_block_inside_the_grad_mode():
    with compilekit.profile(device="cpu", grad="inference"):
        inside = torch.is_inference_mode_enabled()
        torch.ones(4).sum()
    assert inside and not torch.is_inference_mode_enabled()
    with pytest.raises(UserError, match="grad mode 'train'"):
        with compilekit.profile(device="cpu", grad="train"):
            pass
