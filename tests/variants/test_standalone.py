"""Each attention variant runs on its own (`python -m compilekit.variants.<file>`, as
attention-gym's examples do): its time at the default shape and its error against float64,
from any directory; a variant that cannot run here says why in one line."""

import os
import re
import subprocess
import sys

import pytest

from compilekit.variants import VARIANTS
from tests.conftest import ROOT


def alone(module: str, cwd) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": ROOT}  # a checkout's, as an install would give
    return subprocess.run([sys.executable, "-m", module], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)  # fmt: skip


@pytest.mark.parametrize("name", ["naive", "sdpa"])
def test_a_variant_alone_prints_its_time_and_a_float64_error_within_float32s(name, tmp_path):
    done = alone(VARIANTS[name], tmp_path)
    assert done.returncode == 0, done.stderr
    found = re.search(r"([\d.]+) ms per call at 1x8x512x64 float32 on cpu; max error (\S+)",
                      done.stdout)  # fmt: skip
    assert found, done.stdout
    assert float(found[1]) > 0 and float(found[2]) < 1e-5, done.stdout


def test_a_variant_that_cannot_run_here_says_why_in_one_line(tmp_path):
    done = alone(VARIANTS["gluon-flash"], tmp_path)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "Hopper" in done.stderr


def test_every_attention_variant_file_runs_alone():
    for module in VARIANTS.values():
        path = os.path.join(ROOT, "variants", module.rsplit(".", 1)[1] + ".py")
        with open(path) as f:
            text = f.read()
        assert 'if __name__ == "__main__":' in text and "standalone import main" in text, path
