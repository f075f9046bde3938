"""Model workloads (variants.MODELS, a user's factory) through the cell pipeline on CPU, on tiny
configs of the same transformers classes."""

import json
import os

import pytest

from compilekit.measure import workload
from compilekit.model.errors import UserError
from compilekit.model.spec import Tokens, parse_shape
from tests.report.test_null_figures import _cli

pytest.importorskip("transformers", reason="the models extra: pip install 'compilekit[models]'")
TINY = os.path.join(os.path.dirname(__file__), "tiny_models.py")


def test_a_bxs_shape_is_a_models_and_each_kind_refuses_the_other(tmp_path):
    assert parse_shape("8x128") == Tokens(8, 128)
    for variant, shape, needle in [
        ("bert-base", "1x2x16x8", "'bert-base' is a model: give its shape as BxS"),
        ("naive", "8x128", "'naive' is an attention variant: give its shape as BxHxSxD"),
    ]:
        out = tmp_path / "out"
        code, err = _cli("run", "--variant", variant, "--shape", shape, "--out", str(out))
        assert code == 2 and needle in err, err
        assert len(err.strip().splitlines()) == 1 and not out.exists()


def test_an_unknown_attention_after_a_models_at_names_the_models_own(tmp_path):
    code, err = _cli("run", "--variant", "llama-block@nope", "--shape", "1x16", "--out",
                     str(tmp_path / "out"))  # fmt: skip
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "'llama-block' takes one of its own attentions (sdpa, eager, flex_attention)" in err


def test_a_factorys_pair_and_dict_output_become_positional_tensor_calls():
    import torch

    from tests.variants import tiny_models

    made = workload.build(tiny_models.pair, "pair", Tokens(2, 3), "float32", "cpu", 0)
    out = made.fn(*made.inputs)
    assert torch.equal(out, made.inputs[0] * 2)
    ref, what = workload.reference_output(made, made.inputs)
    assert ref.dtype == torch.float64 and what == "the same model in float64"
    with pytest.raises(UserError, match="returned list: return compilekit.Workload"):
        workload.build(tiny_models.returns_a_list, "bad", Tokens(2, 3), "float32", "cpu", 0)


@pytest.mark.parametrize(
    "factory, shape, needle",
    [
        ("returns_a_list", "2x8", "returned list: return compilekit.Workload(fn, inputs)"),
        ("bert", "1x65", "65 tokens exceed the model's 64 positions"),
    ],
)
def test_bad_input_to_a_factory_is_one_line_exit_2(factory, shape, needle, tmp_path):
    code, err = _cli(
        "run", "--variant", f"{TINY}:{factory}", "--mode", "eager", "--shape", shape,
        "--device", "cpu", "--out", str(tmp_path),
    )  # fmt: skip
    assert code == 2 and needle in err, err
    assert len(err.strip().splitlines()) == 1


def test_tiny_bert_compiled_is_checked_against_itself_in_float64_and_mapped_to_its_lines(
    tmp_path, cache_root
):
    """The verdict, the reference, and the kernel map: the forward's device time on lines of
    transformers' modeling_bert.py (its helpers' lines stay in each kernel's stack)."""
    from compilekit.usercell import make_cell, run_cell

    cell = make_cell(f"{TINY}:bert_one_layer", "default", "1x16", "float32", "cpu")
    result = run_cell(cell, str(tmp_path), cache_root=cache_root)
    assert result.status == "ok", result.reason
    assert result.reference == "the same model in float64"
    assert result.max_rel_err < result.error_bound
    with open(os.path.join(result.run_dir, "kernels.json")) as f:
        kernels = json.load(f)
    lines = kernels["by_source_line"]
    on_bert = sum(r["attributed_ms"] for r in lines if "modeling_bert.py" in r["file"])
    # every kernel, the attention and its mask included, charged to a modeling_bert.py line
    assert on_bert == pytest.approx(sum(r["attributed_ms"] for r in lines))
    # the embeddings' kernel gathers 16 rows: it is not counted the word table's 1000
    from compilekit.evidence import partial

    (gather,) = [r for r in kernels["kernels"] if "embedding" in r["name"]]
    assert gather["bytes"] < 1000 * 64 * 4 and partial.UNTOUCHED_FROM in gather["bytes_from"]
    from compilekit.report import opsview

    by_memory = [r.get("allocated_mb") or 0 for r in opsview.ops_rows(result.run_dir, "memory")]
    assert by_memory[0] > 0 and by_memory == sorted(by_memory, reverse=True)
    view = opsview.ops_view(result.run_dir, "memory")
    assert "ops ranked by memory, per forward" in view and "allocated MiB" in view
    # attention's share of the compiled forward, read from the same map's lines
    from compilekit.evidence import shares

    found = result.time_shares
    assert found["by"] == "code" and sum(found[p] for p in shares.PARTS) == pytest.approx(1)
    assert 0.05 < found["attention"] < 0.95 and found["matmuls"] > 0


def test_an_experiment_pairs_each_variant_with_shapes_of_its_kind(tmp_path):
    from compilekit.userexperiment import load_experiment

    toml = tmp_path / "mixed.toml"
    toml.write_text(
        'variants = ["naive", "bert-base"]\nmodes = ["eager"]\n'
        'shapes = ["1x2x16x8", "2x16"]\ndevice = "cpu"\n'
    )
    cells = {(c.variant, str(c.shape)) for c in load_experiment(str(toml)).cells}
    assert cells == {("naive", "1x2x16x8"), ("bert-base", "2x16")}
    toml.write_text('variants = ["bert-base"]\nmodes = ["eager"]\nshapes = ["1x2x16x8"]\n')
    with pytest.raises(UserError, match="'bert-base' is a model: give its shape as BxS"):
        load_experiment(str(toml))


@pytest.mark.parametrize("spec", ["bert-base", "gpt2", "llama-block", "llama3-block@eager"])
def test_each_built_in_model_matches_itself_in_float64_on_a_tiny_config(spec):
    """Each built-in, on a tiny config of its own transformers classes: its output against the
    same model in float64, within the float32 bound (eager: the compiled path is the bert
    cell's test)."""
    from compilekit.compile.variant import load_variant
    from compilekit.measure import inputs
    from tests.variants.tiny_models import TINY

    variant = load_variant(spec)
    tiny = TINY[spec.split("@")[0]]
    made = workload.build(
        lambda s, d, dev: variant.factory(s, d, dev, **tiny), spec, Tokens(2, 16), "float32",
        "cpu", 0,
    )  # fmt: skip
    out = made.fn(*made.inputs)
    ref, what = workload.reference_output(made, made.inputs)
    assert out.shape[:2] == (2, 16) and what == "the same model in float64"
    assert inputs.max_rel_err(out, ref) < inputs.ERROR_BOUNDS["float32"]


PLUGGED = r"""
import json, sys, torch
import compilekit.variants.triton_flash as tf
calls, real = [], tf.attention
tf.attention = lambda q, k, v: (calls.append(tuple(q.shape)), real(q, k, v))[1]
from compilekit.compile.variant import load_variant
from compilekit.measure import workload
from compilekit.model.spec import Tokens
from tests.variants.tiny_models import TINY
outs = {}
for spec in ("llama3-block@sdpa", "llama3-block@triton-flash"):
    v = load_variant(spec)
    made = workload.build(lambda s, d, dev: v.factory(s, d, dev, **TINY["llama3-block"]),
                          spec, Tokens(2, 40), "float32", "cpu", 0)
    outs[spec] = made.fn(*made.inputs)
    ref, what = workload.reference_output(made, made.inputs)
diff = (outs["llama3-block@sdpa"] - outs["llama3-block@triton-flash"]).abs().max().item()
print(json.dumps({"diff": diff, "calls": calls, "reference": what}))
"""


def test_triton_flash_plugged_into_a_tiny_llama3_block_matches_its_sdpa():
    """Through Triton's interpreter, in a child process (the interpreter is chosen at import):
    the block's attention runs in triton-flash (4 query heads, its 2 K/V heads repeated), and
    the block's output matches the same block with SDPA; the reference stays SDPA's."""
    import subprocess
    import sys

    pytest.importorskip("triton", reason="triton not installed (pip install triton numpy)")
    from tests.conftest import ROOT

    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": ROOT}
    done = subprocess.run(
        [sys.executable, "-c", PLUGGED], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["calls"] == [[2, 4, 40, 16]]
    assert seen["diff"] < 1e-5
    assert seen["reference"] == "the same model in float64 with {'_attn_implementation': 'sdpa'}"


CACHED_DECODE = r"""
import json, torch
import compilekit.variants.triton_flash as tf
queries, real = [], tf.cached_attention
tf.cached_attention = lambda q, k, v, lens: (queries.append([q.shape[2], lens.tolist()]),
                                             real(q, k, v, lens))[1]
from compilekit.compile.variant import load_variant
from compilekit.measure import workload
from compilekit.measure.decode.loop import run_loop
from compilekit.measure.decode.session import Session
from compilekit.model.errors import UserError
from compilekit.model.spec import parse_shape
from tests.variants.tiny_models import TINY_LLAMA_LM
shape, runs, sessions = parse_shape("2x6+5@24"), {}, {}
for spec in ("llama2-7b@sdpa", "llama2-7b@triton-flash", "llama2-7b@naive"):
    v = load_variant(spec)
    made = workload.build(lambda s, d, dev: v.factory(s, d, dev, **TINY_LLAMA_LM), spec, shape,
                          "float32", "cpu", 0)
    try:
        session = Session(made, shape, spec)
    except UserError as exc:
        runs[spec] = str(exc)
        continue
    runs[spec] = run_loop(session, session.prefill, session.step, keep=range(5))
    sessions[spec] = (session, made.reference_config)
sdpa, flash = runs["llama2-7b@sdpa"], runs["llama2-7b@triton-flash"]
diff = max(float((a - b).abs().max()) for a, b in zip(sdpa.logits, flash.logits))
seen = len(queries)
truths = {}  # each session's float64 reference, as the decode cell's check makes it
for spec, (session, config) in sessions.items():
    session.retyped(torch.float64, positions=11, config=config)
    truths[spec] = run_loop(session, session.prefill, session.step, forced=sdpa.tokens,
                            keep=range(5)).logits
ref_diff = max(float((a - b).abs().max())
               for a, b in zip(truths["llama2-7b@sdpa"], truths["llama2-7b@triton-flash"]))
print(json.dumps({"same": bool(torch.equal(sdpa.tokens, flash.tokens)), "diff": diff,
                  "queries": queries[:seen], "reference_queries": queries[seen:],
                  "ref_diff": ref_diff, "naive": runs["llama2-7b@naive"]}))
"""


def test_triton_flash_decodes_a_tiny_llama_over_its_static_cache_as_sdpa_does():
    """Plugged into a tiny Llama LM (GQA 4/2) and decoding over compilekit's static cache of 24
    slots, through the interpreter: the prompt's 6 queries and each later token read only the
    filled keys (their count from the model's positions: 6, then 7, 8, ...), and the tokens and
    logits are SDPA's with its mask; an attention without a cache path is refused, one line.
    Its float64 reference runs the model's own SDPA, not the kernel under test."""
    import subprocess
    import sys

    pytest.importorskip("triton", reason="triton not installed (pip install triton numpy)")
    from tests.conftest import ROOT

    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": ROOT}
    done = subprocess.run(
        [sys.executable, "-c", CACHED_DECODE], env=env, capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["same"] and seen["diff"] < 1e-4, seen
    # one layer: the session's own prefill, the loop's prefill, then one call per later token
    assert seen["queries"] == [[6, [6, 6]], [6, [6, 6]], [1, [7, 7]], [1, [8, 8]], [1, [9, 9]],
                               [1, [10, 10]]], seen["queries"]  # fmt: skip
    assert seen["reference_queries"] == [] and seen["ref_diff"] == 0.0, seen
    assert "takes queries and keys of one length" in seen["naive"]
    assert "@triton-flash" in seen["naive"] and "\n" not in seen["naive"]
