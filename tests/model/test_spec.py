"""Parsing what users type: shapes, dtypes, devices, variants, modes."""

import os

import pytest

from compilekit.cli import main
from compilekit.model.spec import UserError, parse_dtype, parse_shape
from tests.report.test_null_figures import _cli


def test_shape_round_trip_and_flops():
    from compilekit.variants.masks import attention_flops

    shape = parse_shape("8x16x1024x64")
    assert str(shape) == "8x16x1024x64" and shape.keys == 1024
    assert attention_flops(shape) == 4 * 8 * 16 * 64 * 1024 * 1025 / 2
    # Q queries over K keys: the last Q of K positions, so query i sees K - Q + i + 1 keys
    decode = parse_shape("16x32x3x8192x128")
    assert (decode.seq, decode.keys, str(decode)) == (3, 8192, "16x32x3x8192x128")
    pairs = 8190 + 8191 + 8192
    assert attention_flops(decode) == 4 * 16 * 32 * 128 * pairs
    assert str(parse_shape("1x2x64x64x16")) == "1x2x64x16"  # Q == K is the usual shape
    with pytest.raises(UserError, match="Q must be at most K"):
        parse_shape("1x2x65x64x16")


def test_only_variants_that_take_a_query_length_apart_run_at_one(tmp_path):
    code, err = _cli("run", "--variant", "naive", "--shape", "1x2x1x64x16", "--out", str(tmp_path))
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "'naive' takes queries and keys of one length" in err and "triton-flash" in err


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


def test_a_bare_folder_or_file_gets_the_spelling_that_measures_it(tmp_path, capsys):
    """A checkpoint folder given without hf:, or a variant file without its callable, is
    answered with that spelling, not the list of registered names."""
    (tmp_path / "config.json").write_text("{}")
    assert main(["run", "--variant", f"{tmp_path}@sdpa"]) == 2
    assert f"give it as hf:{tmp_path}@sdpa" in capsys.readouterr().err
    mine = tmp_path / "mine.py"
    mine.write_text("def attn(q, k, v):\n    return q\n")
    assert main(["run", "--variant", str(mine)]) == 2
    err = capsys.readouterr().err
    assert f"{mine}:my_attention" in err and "choose one of" not in err


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

    from compilekit import usercell

    # read from torch/version.py without importing torch: the same answer torch gives
    assert usercell._torch_cuda_build() is (torch.version.cuda is not None)
    monkeypatch.setattr(usercell, "_torch_cuda_build", lambda: False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert usercell.cuda_available() is False  # certain: a CPU build
    monkeypatch.setattr(usercell, "_torch_cuda_build", lambda: True)
    monkeypatch.setattr(usercell, "_driver_device_count", lambda: 0)
    assert usercell.cuda_available() is True  # the probe saw nothing: torch decides
    monkeypatch.setattr(usercell, "_driver_device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert usercell.cuda_available() is True  # the driver reports devices


def test_every_committed_experiment_file_loads():
    """Every experiment in experiments/ is a valid spec."""
    import glob

    from compilekit.userexperiment import load_experiment
    from tests.conftest import ROOT

    paths = sorted(glob.glob(f"{ROOT}/experiments/*.toml"))
    assert len(paths) >= 5, paths
    for path in paths:
        cells = load_experiment(path).cells
        assert cells, path


def test_every_name_a_user_gives_reaches_the_file_system_as_one_safe_name(tmp_path):
    """A variant's file and function, a model's plugged attention, a pass's file and factory,
    an Inductor option's value, a seed, a ragged shape, an experiment's and a config's name:
    each reaches a run directory's, cache folder's or sweep's name through spec.path_safe, and
    the name never leaves the folder it is made in ('../' once wrote a run outside --out)."""
    from compilekit.compile.knobs import name_of
    from compilekit.model.spec import Cell, path_safe
    from compilekit.userexperiment import good_name

    evil = "../../up/..\\x y<b>"
    shape = parse_shape("1x2x16x8")
    cells = [
        Cell(f"{evil}.py:{evil}", "eager", shape, "float32", "cpu"),
        Cell(f"bert-base@{evil}.py:{evil}", "eager", parse_shape("1x16"), "float32", "cpu"),
        Cell("naive", "default", shape, "float32", "cpu", passes=(f"{evil}.py:{evil}",)),
        Cell("naive", "default", shape, "float32", "cpu", passes=(evil,)),
        Cell("naive", "default", shape, "float32", "cpu", 7, (("k", evil),), name_of({"k": evil})),
        Cell("varlen-attn", "eager", parse_shape("100,37,512x32x128"), "float32", "cpu"),
        Cell("naive", "eager", shape, "float32", "cpu", config=(("k", 1),), config_name=evil),
    ]
    for cell in cells:
        label = cell.label()
        out = tmp_path / "out"
        assert os.path.dirname(os.path.normpath(out / label)) == str(out), label
        assert "/" not in label and "\\" not in label and not label.startswith("."), label
    assert "100,37,512x32x128" in cells[5].label()  # what was safe stays as it was
    assert cells[0].label() != Cell(f"{evil}2.py:{evil}", "eager", shape, "float32", "cpu").label()
    for name in ("..", ".hidden", "a/b", "a b", "", "x" * 101):
        assert not good_name(name), name
        assert "/" not in path_safe(name) and not path_safe(name).startswith(".")
    assert good_name("blog_part3") and good_name("knobs-1.0")
