"""hf:<checkpoint>: a user's transformers checkpoint, a folder save_pretrained wrote, measured
as it is: its own class, its weights where it has them (else random from its config), its
forward and its decode; every bad input one line."""

import os
import subprocess
import sys

import pytest
import torch

from compilekit.compile.variant import check_variant, load_variant
from compilekit.measure import workload
from compilekit.model.errors import UserError
from compilekit.model.spec import parse_shape
from tests.conftest import ROOT
from tests.variants.tiny_models import tiny_transformers

pytest.importorskip("transformers")  # the models extra

TINY = tiny_transformers()


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    """{name: (folder with weights, folder of config.json alone, the model saved)}."""
    root = tmp_path_factory.mktemp("checkpoints")
    made = {}
    for name, (model_class, config) in TINY.items():
        torch.manual_seed(0)
        model = model_class(config).eval()
        model.save_pretrained(root / name)
        model.config.save_pretrained(root / f"{name}-config")
        made[name] = (str(root / name), str(root / f"{name}-config"), model)
    return made


def _built(spec: str, shape="2x12", weights="auto"):
    variant = load_variant(spec, weights)
    return workload.build(variant.factory, spec, parse_shape(shape), "float32", "cpu", 0)


@pytest.mark.parametrize("name", TINY)
def test_a_checkpoint_runs_its_own_class_with_its_weights_or_random_ones(name, checkpoints):
    folder, config_only, saved = checkpoints[name]
    assert check_variant(f"hf:{folder}") is True  # a workload: its shapes are BxS
    made = _built(f"hf:{folder}")
    assert type(made.model) is type(saved) and made.note == "weights: model.safetensors"
    ids = made.inputs[made.input_names.index("input_ids")]
    assert int(ids.max()) < 100 and ids.shape == (2, 12)
    with torch.no_grad():
        theirs = workload.first_tensor(saved(**dict(zip(made.input_names, made.inputs))))
    assert torch.equal(made.fn(*made.inputs), theirs)
    for random in (_built(f"hf:{config_only}"), _built(f"hf:{folder}", weights="random")):
        assert random.note == "weights: random, from the config"
        assert type(random.model) is type(saved)
        assert not torch.equal(random.fn(*random.inputs), theirs)


def test_random_weights_take_the_cells_dtype_not_the_one_config_json_names(checkpoints):
    """The tiny checkpoints' config.json says float32: a bfloat16 cell builds in bfloat16,
    from the config alone and with --weights random, a causal LM (decode) and an encoder."""
    for name, shape in (("llama", "1x4+4"), ("bert", "2x12")):
        folder, config_only, _ = checkpoints[name]
        for spec, weights in ((f"hf:{config_only}", "auto"), (f"hf:{folder}", "random")):
            variant = load_variant(spec, weights)
            made = workload.build(variant.factory, spec, parse_shape(shape), "bfloat16", "cpu", 0)
            assert {p.dtype for p in made.model.parameters()} == {torch.bfloat16}, (name, spec)


def test_bad_checkpoints_are_one_line_each(checkpoints, tmp_path, monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # read as the hub client is imported: and here
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    empty = tmp_path / "empty"
    empty.mkdir()
    alien = tmp_path / "alien"
    alien.mkdir()
    (alien / "config.json").write_text('{"model_type": "no-such-model", "vocab_size": 10}')
    bert = checkpoints["bert"][0]
    for spec, words in [
        (f"hf:{tmp_path / 'missing'}", "no folder"),
        (f"hf:{empty}", "holds no config.json: give a folder that model.save_pretrained"),
        (f"hf:{alien}", "does not know its architecture"),
        ("hf:nobody/no-model", "not in the Hugging Face cache"),
        (f"hf:{bert}@triton-flash", "attends both ways"),
    ]:
        with pytest.raises(UserError, match=words) as raised:
            check_variant(spec)
        assert "\n" not in str(raised.value)
    with pytest.raises(UserError, match="HF_HUB_OFFLINE is set"):
        check_variant("hf:nobody/no-model")
    with pytest.raises(UserError, match="does not attend causally, and a decode shape"):
        _built(f"hf:{bert}", shape="1x8+4")  # BERT's LM head over an encoder: no decode


def test_the_command_line_measures_a_checkpoint_and_decodes_a_causal_one(checkpoints, tmp_path):
    """From another folder: a forward with its weights, and both decode paths of a causal
    LM's config alone; a relative folder and --weights random on a built-in, one line each."""
    runs = tmp_path / "runs"

    def run(*args, cwd=tmp_path):
        return subprocess.run(
            [sys.executable, "-m", "compilekit", "run", "--mode", "eager", "--device", "cpu",
             "--out", str(runs), *args],
            cwd=cwd, capture_output=True, text=True, timeout=300,
            env={**os.environ, "PYTHONPATH": ROOT},
        )  # fmt: skip

    bert = checkpoints["bert"][0]
    os.symlink(bert, tmp_path / "my-bert")
    forward = run("--variant", "hf:my-bert", "--shape", "2x12")
    assert forward.returncode == 0, forward.stderr[-2000:]
    assert "weights: model.safetensors" in forward.stdout
    assert ": ok (" in forward.stdout.splitlines()[0]
    decode = run("--variant", f"hf:{checkpoints['llama'][1]}", "--shape", "1x8+4")
    assert decode.returncode == 0, decode.stderr[-2000:]
    lines = decode.stdout.splitlines()
    assert "weights: random, from the config" in lines
    assert any(ln.startswith("attention ") and "of the device time (matmuls" in ln for ln in lines)
    for path in ("loop", "generate"):
        row = next(ln for ln in lines if ln.startswith(path))
        assert row.rstrip().endswith("4/4"), row  # its tokens are eager's
    labels = sorted(d.name for d in runs.iterdir())
    assert labels[0].startswith("hf-llama-config-") and labels[1].startswith("hf-my-bert-")
    refused = run("--variant", "naive", "--weights", "random")
    assert refused.returncode == 2 and "goes with a checkpoint" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
