"""A built-in model too large for its device is refused in one line, with its sizes, before its
weights exist (compilekit/measure/fits.py)."""

import pytest

from compilekit.measure import fits
from compilekit.model.errors import Unsupported
from compilekit.model.spec import parse_shape
from tests.report.test_null_figures import _cli

pytest.importorskip("transformers", reason="the models extra: pip install 'compilekit[models]'")


def test_llama2_7b_needs_its_weights_and_its_checks_float_copy(monkeypatch):
    from variants import llama2_7b

    monkeypatch.setattr(fits, "capacity", lambda device: (20 * fits.GIB, "this machine"))
    # a decode converts its weights in place for the check: bf16 peaks at their float32 size
    with pytest.raises(Unsupported) as refused:
        fits.check(llama2_7b.workload, "llama2-7b", parse_shape("1x8+4"), "bfloat16", "cpu")
    assert "needs at least 25.1 GiB (6.74 B parameters: 12.6 GiB in bfloat16" in str(refused.value)
    assert "this machine has 20.0 GiB" in str(refused.value)
    # a forward's check is a float64 copy beside the weights
    with pytest.raises(Unsupported, match=r"needs at least 62\.8 GiB .* 50\.2 GiB more"):
        fits.check(llama2_7b.workload, "llama2-7b", parse_shape("1x8"), "bfloat16", "cpu")
    monkeypatch.setattr(fits, "capacity", lambda device: (80 * fits.GIB, "the GPU"))
    fits.check(llama2_7b.workload, "llama2-7b", parse_shape("1x8"), "bfloat16", "cuda")


def test_a_factory_that_cannot_build_on_meta_gets_no_estimate():
    def loads_a_file(shape, dtype, device):
        raise FileNotFoundError("weights.pt")

    fits.check(loads_a_file, "mine", parse_shape("1x8"), "float32", "cpu")  # no exception


def test_a_model_too_large_for_this_machine_is_refused_exit_2_in_one_line(tmp_path):
    have, _ = fits.capacity("cpu")
    if have is None or have > 80 * fits.GIB:  # llama3-8b's float32 forward needs 89.7 GiB
        pytest.skip(f"this machine holds {have} bytes: the model would fit and run")
    out = tmp_path / "out"
    code, err = _cli(
        "run", "--variant", "llama3-8b", "--mode", "eager", "--shape", "1x8", "--device", "cpu",
        "--out", str(out),
    )  # fmt: skip
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "'llama3-8b' cannot run on cpu float32 at 1x8: it needs at least 89.7 GiB" in err
