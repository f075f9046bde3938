"""Attention at decode shapes (BxHxQxKxD: a few queries over a longer cache) on the CPU: the
SDPA and flex variants against the bottom-right float64 reference, and a cell end to end.
triton-flash's split-KV kernel: tests/variants/test_triton_flash.py."""

import json

import pytest
import torch

from compilekit.compile.variant import load_variant
from compilekit.measure.inputs import make_inputs
from compilekit.model.spec import parse_shape
from compilekit.variants.masks import reference

CPU_VARIANTS = ["sdpa", "sdpa-math", "sdpa-flash", "sdpa-gqa", "flex", "flex-gqa"]


@pytest.mark.parametrize("variant", CPU_VARIANTS)
@pytest.mark.parametrize("shape", ["1x8x1x300x64", "2x8x3x129x32", "2x8g2x3x129x32"])
def test_variant_matches_the_bottom_right_reference(variant, shape):
    """One query sees every key; three see all but the last two, one and none: what
    SDPA's is_causal (top-left when the lengths differ) would get wrong. With G K/V heads
    (8g2), every variant takes them as they are."""
    found = load_variant(variant)
    q, k, v = make_inputs(parse_shape(shape), "float32", "cpu", 0)
    assert k.shape[2] > q.shape[2]
    with torch.no_grad():
        out = found.attention(q, k, v)
    truth = (found.reference or reference)(q.double(), k.double(), v.double())
    assert out.shape == q.shape
    assert float((out.double() - truth).abs().max() / truth.abs().max()) < 1e-5


def test_flex_compiles_one_query_over_a_long_cache():
    """One query sees every key, so flex takes no block mask there: Inductor's C++ lowering of
    the bottom-right mask_mod fails (CppCompileError) at one query over a cache."""
    found = load_variant("flex")
    q, k, v = make_inputs(parse_shape("1x4g2x1x2048x32"), "float32", "cpu", 0)
    with torch.no_grad():
        out = torch.compile(found.attention)(q, k, v)
    truth = reference(q.double(), k.double(), v.double())
    assert float((out.double() - truth).abs().max() / truth.abs().max()) < 1e-5


def test_a_decode_shape_cell_is_checked_and_credited_its_pairs(tmp_path, cli):
    proc = cli("run", "--variant", "sdpa", "--mode", "eager", "--device", "cpu",
               "--shape", "1x4x3x200x32", "--out", str(tmp_path))  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads(
        (tmp_path / "sdpa__eager__1x4x3x200x32__float32__cpu/result.json").read_text()
    )
    assert result["status"] == "ok" and result["max_rel_err"] < 1e-5
    assert result["flops"] == 4 * 4 * 32 * (198 + 199 + 200)


def test_a_gqa_shape_names_its_kv_heads_and_the_inputs_have_them():
    shape = parse_shape("16x32g8x1x8192x128")
    assert (shape.heads, shape.kv_heads, shape.seq, shape.keys) == (32, 8, 1, 8192)
    assert str(shape) == "16x32g8x1x8192x128" and str(parse_shape("2x8g8x64x32")) == "2x8x64x32"
    q, k, v = make_inputs(parse_shape("1x8g2x3x40x16"), "float32", "cpu", 0)
    assert q.shape == (1, 8, 3, 16) and k.shape == v.shape == (1, 2, 40, 16)


@pytest.mark.parametrize(
    "variant, shape, needle",
    [
        ("sdpa", "1x32g5x1x100x64", "5 K/V heads must divide the 32 query heads"),
        ("sdpa", "1x32g0x1x100x64", "malformed shape"),
        ("naive", "1x8g2x64x32", "'naive' takes K/V with the query heads"),
    ],
)
def test_bad_gqa_shapes_are_one_line_exit_2(tmp_path, cli, variant, shape, needle):
    proc = cli("run", "--variant", variant, "--mode", "eager", "--device", "cpu",
               "--shape", shape, "--out", str(tmp_path))  # fmt: skip
    assert proc.returncode == 2 and needle in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
