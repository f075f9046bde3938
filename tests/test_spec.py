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
