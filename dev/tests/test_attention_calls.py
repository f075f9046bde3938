"""dev/attention_calls.py: the configs a variant's autotuners chose go to a file, and a run
pinned to a file runs those configs (so Nsight Compute profiles the kernel the timings ran).
Through Triton's interpreter on a CPU."""

import json
import os
import subprocess
import sys

import pytest

SCRIPT = os.path.join(os.path.dirname(os.path.dirname(__file__)), "attention_calls.py")


def _run(*args, tmp_path):
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    done = subprocess.run(
        [sys.executable, SCRIPT, "triton-flash", "1x2x48x32", "--calls", "2", *args],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_the_chosen_config_is_written_and_a_pinned_one_is_run(tmp_path):
    pytest.importorskip("triton")
    tuned = tmp_path / "tuned.json"
    _run("--tuned-json", str(tuned), tmp_path=tmp_path)
    chosen = json.loads(tuned.read_text())["_attn_fwd"]
    assert {"BLOCK_M", "BLOCK_N", "num_warps", "num_stages"} <= set(chosen)
    other = {**chosen, "BLOCK_M": chosen["BLOCK_M"] * 2}
    pinned = tmp_path / "pinned.json"
    pinned.write_text(json.dumps({"_attn_fwd": other}))
    again = tmp_path / "again.json"
    out = _run("--pin", str(pinned), "--tuned-json", str(again), tmp_path=tmp_path)
    assert "pinned: _attn_fwd" in out
    assert json.loads(again.read_text())["_attn_fwd"] == other
