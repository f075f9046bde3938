"""Whole cells on the CPU: every variant, every mode for naive, the result.json contract."""

import json
import os

import pytest

from variants import VARIANTS

CONTRACT = {
    "variant",
    "mode",
    "shape",
    "dtype",
    "device",
    "torch_version",
    "ok",
    "max_rel_err",
    "eager_ms",
    "compiled_ms",
    "speedup",
    "compile_cold_s",
    "compile_warm_s",
    "tflops",
}
# Built-ins whose backend has no CPU kernel; torch itself must say so (we record its words).
NO_CPU_KERNEL = {"sdpa-efficient", "sdpa-cudnn"}
# Triton kernels need a GPU, or the interpreter (tests/test_triton_flash.py runs that).
NEEDS_GPU = {"triton-flash", "triton-flash-gqa", "triton-flash-window"}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_every_variant_eager_on_cpu(run_cell, variant):
    result = run_cell(variant, "eager")
    if variant in NEEDS_GPU and os.environ.get("TRITON_INTERPRET") != "1":
        assert "needs a CUDA GPU, or Triton's interpreter" in result["unsupported"] or (
            "needs Triton" in result["unsupported"]
        )
        return
    if variant in NO_CPU_KERNEL:
        assert result["unsupported"] and "cannot run on cpu" in result["unsupported"]
        assert "No available kernel" in result["unsupported"] or "not" in result["unsupported"]
        return
    assert result["error"] is None, result["error"]
    assert result["ok"], result
    assert result["max_rel_err"] < 1e-3
    assert result["compiled_ms"] == result["eager_ms"]
    assert result["compile_cold_s"] == result["compile_warm_s"] == 0.0


@pytest.mark.parametrize(
    "mode", ["default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"]
)
def test_every_mode_runs_naive_on_cpu(run_cell, mode):
    result = run_cell("naive", mode)
    assert result["error"] is None, result["error"]
    assert result["ok"] and result["max_rel_err"] < 1e-4
    assert result["compile_cold_s"] > 0 and result["compile_warm_s"] > 0
    assert result["kernels_per_forward"] >= 1
    cudagraphs = result["cudagraphs"]
    if mode in ("reduce-overhead", "max-autotune"):
        # asked for, never applied on CPU, and the run says so with torch's reason
        assert cudagraphs["requested"] and not cudagraphs["applied"]
        assert "skipped on cpu" in cudagraphs["note"]
    else:
        assert not cudagraphs["requested"]


def test_result_json_contract(run_cell):
    result = run_cell("naive", "default")
    with open(os.path.join(result["run_dir"], "result.json")) as f:
        on_disk = json.load(f)
    assert CONTRACT <= set(on_disk)
    assert on_disk["shape"] == "1x4x128x32" and on_disk["device"] == "cpu"
    assert on_disk["speedup"] == pytest.approx(on_disk["eager_ms"] / on_disk["compiled_ms"])
    flop = 4 * 1 * 4 * 128 * 128 * 32 / 2
    assert on_disk["tflops"] == pytest.approx(flop / (on_disk["compiled_ms"] * 1e-3) / 1e12)
    for name in ("trace.json", "profile.txt", "kernels.json", "ops.json", "depyf", "kernels"):
        assert os.path.exists(os.path.join(result["run_dir"], name)), name


def test_second_run_reuses_the_cold_measurement(run_cell, cache_root, tmp_path):
    from compilekit import runner
    from compilekit.spec import Cell, parse_shape

    first = run_cell("naive", "default")
    cell = Cell("naive", "default", parse_shape("1x4x128x32"), "float32", "cpu")
    again = runner.launch(cell, str(tmp_path), cache_root=cache_root)
    assert again["ok"]
    assert again["compile_cold_s"] == first["compile_cold_s"]
    assert "from the first run" in again["compile_cold_note"]
    assert os.listdir(os.path.join(again["run_dir"], "kernels"))  # the capture came along


def test_cudagraphs_mode_on_cpu_is_refused(cli):
    proc = cli(
        "run",
        "--variant",
        "naive",
        "--mode",
        "cudagraphs",
        "--device",
        "cpu",
        "--shape",
        "1x2x128x32",
    )
    assert proc.returncode == 2
    assert "needs a CUDA device" in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_cudnn_on_cpu_is_refused_with_torchs_reason(cli):
    proc = cli(
        "run",
        "--variant",
        "sdpa-cudnn",
        "--mode",
        "eager",
        "--device",
        "cpu",
        "--shape",
        "1x2x128x32",
    )
    assert proc.returncode == 2, proc.stderr
    assert "cannot run on cpu" in proc.stderr and "compilekit list" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


USER_VARIANT = '''"""Soft-capped causal attention (Gemma-2 style), an op no built-in variant uses."""
import math
import torch


def capped_attention(q, k, v):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    scores = 30.0 * torch.tanh(scores / 30.0)
    mask = torch.ones(q.shape[-2], q.shape[-2], dtype=torch.bool, device=q.device).triu(1)
    scores = scores.masked_fill(mask, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v
'''


@pytest.fixture(scope="session")
def user_variant(tmp_path_factory):
    path = tmp_path_factory.mktemp("user") / "capped.py"
    path.write_text(USER_VARIANT)
    return str(path)


def test_user_variant_runs_checked_against_itself(run_cell, user_variant):
    result = run_cell(f"{user_variant}:capped_attention", "default")
    assert result["error"] is None, result["error"]
    assert result["ok"] and result["max_rel_err"] < 1e-4


def test_cli_run_prints_table_and_run_dir(cli, tmp_path):
    proc = cli(
        "run",
        "--variant",
        "naive",
        "--mode",
        "eager",
        "--shape",
        "1x4x128x32",
        "--out",
        str(tmp_path),
    )
    assert proc.returncode == 0, proc.stderr
    assert "eager_ms" in proc.stdout and "run directory:" in proc.stdout
    assert os.path.isfile(tmp_path / "naive__eager__1x4x128x32__float32__cpu" / "result.json")
