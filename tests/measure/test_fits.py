"""A built-in model too large for its device is refused in one line, with its sizes, before its
weights exist (compilekit/measure/fits.py)."""

import pytest

from compilekit.measure import fits
from compilekit.model.errors import Unsupported
from compilekit.model.spec import parse_shape
from tests.report.test_null_figures import _cli

pytest.importorskip("transformers", reason="the models extra: pip install 'compilekit[models]'")


def test_llama2_7b_needs_its_weights_and_its_checks_float_copy(monkeypatch):
    from compilekit.variants import llama2_7b

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


def test_a_gpu_cell_whose_weights_fit_is_checked_on_the_host_where_its_copy_fits_there(
    monkeypatch,
):
    """llama2-7b bf16 on a 24 GiB GPU: 12.6 GiB of weights fit, their float32 copy (25.1 GiB)
    does not; a host of 64 GiB takes the copy, one of 16 GiB does not, and weights larger
    than the GPU are refused whatever the host holds."""
    from compilekit.variants import llama2_7b

    host = {"size": 64 * fits.GIB}
    sizes = {"cuda": 24 * fits.GIB}
    monkeypatch.setattr(
        fits,
        "capacity",
        lambda d: (sizes["cuda"], "the GPU") if d == "cuda" else (host["size"], "this machine"),
    )
    decode, forward = parse_shape("1x8+4"), parse_shape("1x8")
    fits.check(llama2_7b.workload, "llama2-7b", decode, "bfloat16", "cuda")
    fits.check(llama2_7b.workload, "llama2-7b", forward, "bfloat16", "cuda")  # 50.2 on the host
    host["size"] = 16 * fits.GIB
    with pytest.raises(Unsupported) as refused:
        fits.check(llama2_7b.workload, "llama2-7b", decode, "bfloat16", "cuda")
    assert "the GPU has 24.0 GiB, and the check's copy does not fit this machine's 16.0 GiB" in (
        str(refused.value)
    )
    host["size"], sizes["cuda"] = 512 * fits.GIB, 12 * fits.GIB
    with pytest.raises(Unsupported, match=r"needs at least 25\.1 GiB .* the GPU has 12\.0 GiB;"):
        fits.check(llama2_7b.workload, "llama2-7b", decode, "bfloat16", "cuda")


@pytest.mark.parametrize(
    "free, host, place",
    [(30, 100, "cuda:0"), (20, 100, "cpu"), (20, 10, "cuda:0"), (20, None, "cuda:0")],
)
def test_the_check_goes_to_the_host_only_where_the_gpu_has_no_room_and_the_host_has(
    monkeypatch, free, host, place
):
    """A 25 GiB copy (with its 10% headroom, 27.5): on the GPU with 30 GiB free; on the host
    with 20 free there and 100 on the host; on the GPU where the host has no room either (its
    out-of-memory error then speaks). A CPU cell's copy stays on the CPU."""
    import torch

    emptied = []
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda d: (free * fits.GIB, 80 * fits.GIB))
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: emptied.append(1))
    monkeypatch.setattr(fits, "ram_available", lambda: host and host * fits.GIB)
    where, said = fits.reference_device("cuda:0", 25 * fits.GIB)
    assert where == place
    assert bool(emptied) == (free < 27.5)  # cached blocks given back before the host is chosen
    if place == "cpu":
        assert said == ", on the host (25.0 GiB of float copy; the GPU had 20.0 GiB free)"
    else:
        assert said == ""
    assert fits.reference_device("cpu", 10**15) == ("cpu", "")


def test_the_float_copy_leaves_the_model_as_it_was_and_keeps_tied_weights_tied():
    """The reference's float64 copy is made a tensor at a time: the original's weights keep
    their dtype and storage, the copy's tied embedding and head stay one tensor, and the
    copy's output is the original's within float32's rounding."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from compilekit.measure.workload import float_copy

    dims = dict(hidden_size=16, intermediate_size=32, num_attention_heads=2,
                num_key_value_heads=1, num_hidden_layers=1, vocab_size=64)  # fmt: skip
    model = LlamaForCausalLM(LlamaConfig(**dims, tie_word_embeddings=True)).eval()
    before = {n: (p.dtype, p.data_ptr()) for n, p in model.named_parameters()}
    copy64 = float_copy(model, torch.float64, "cpu")
    assert {n: (p.dtype, p.data_ptr()) for n, p in model.named_parameters()} == before
    assert {p.dtype for p in copy64.parameters()} == {torch.float64}
    assert copy64.lm_head.weight is copy64.model.embed_tokens.weight
    assert copy64.model.rotary_emb.inv_freq.dtype == torch.float64  # buffers too
    ids = torch.randint(0, 64, (2, 5))
    with torch.no_grad():
        diff = (copy64(ids).logits - model(ids).logits.double()).abs().max()
    assert diff < 1e-5


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


GPU = pytest.mark.skipif(not __import__("torch").cuda.is_available(), reason="needs a CUDA GPU")


@pytest.mark.gpu
@GPU
def test_on_a_gpu_a_forward_checked_on_the_host_gives_the_gpus_reference(monkeypatch):
    """A tiny Llama LM's float64 reference made on the host: on the GPU beside the output it
    checks, equal to the one made on the GPU, said so, and the model left on the GPU."""
    import torch

    from compilekit.measure import workload
    from tests.variants.tiny_models import llama_lm

    made = workload.build(llama_lm, "tiny", parse_shape("2x16"), "bfloat16", "cuda", 0)
    on_gpu, what = workload.reference_output(made, made.inputs)
    assert what == "the same model in float64"
    monkeypatch.setattr(fits, "reference_device", lambda d, need: ("cpu", ", on the host (x)"))
    on_host, what = workload.reference_output(made, made.inputs)
    assert what == "the same model in float64, on the host (x)"
    assert on_host.device == on_gpu.device and on_host.dtype == torch.float64
    # Llama's rotary embedding takes its angles, cos and sin in float32 on either device, and
    # the two devices' float32 sin and cos differ in the last bit, which leaves the two
    # references about 1e-7 of the output's largest entry apart. That the copy is float64
    # throughout is the CPU test of float_copy's to say (a float32 copy sits 2.6e-7 from it);
    # here a reference of other weights, inputs or a bf16 model (1e-3 apart) fails
    assert (on_host - on_gpu).abs().max() <= 1e-6 * on_gpu.abs().max()
    assert {p.device.type for p in made.model.parameters()} == {"cuda"}


@pytest.mark.gpu
@GPU
def test_on_a_gpu_a_decode_reference_on_the_host_matches_the_gpus():
    """The decode check's float32 reference of a tiny Llama LM, its weights moved to the host
    with everything its steps read: the same logits as on the GPU, on the host."""
    import torch

    from compilekit.measure import workload
    from compilekit.measure.decode.loop import run_loop
    from compilekit.measure.decode.session import Session
    from tests.variants.tiny_models import llama_lm

    shape, logits = parse_shape("2x8+6"), {}
    for place in (None, "cpu"):
        made = workload.build(llama_lm, "tiny", shape, "bfloat16", "cuda", 0)
        session = Session(made, shape, "tiny")
        tokens = run_loop(session, session.prefill, session.step).tokens
        session.retyped(torch.float32, positions=8 + 4, device=place)
        run = run_loop(session, session.prefill, session.step, forced=tokens, keep=range(4))
        logits[place] = run.logits
    assert {t.device.type for t in logits["cpu"]} == {"cpu"}
    for gpu, host in zip(logits[None], logits["cpu"]):
        assert (gpu.cpu() - host).abs().max() <= 1e-4 * host.abs().max()
