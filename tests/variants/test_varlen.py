"""Ragged batches (varlen shapes) on the CPU: the shape and its bad input, the work accounting
by hand, each varlen variant against the per-document float64 reference (triton-flash-varlen
through Triton's interpreter), and the recompile report when the batch changes."""

import dataclasses
import json
import re

import pytest

from compilekit.model.errors import UserError
from compilekit.model.spec import parse_shape
from compilekit.model.varlen import Varlen, causal_pairs
from tests.report.test_null_figures import _cli
from tests.variants.test_triton_flash import _child


def test_listed_lengths_and_seeded_distributions():
    listed = parse_shape("100,37,70x4g2x16")
    assert listed == Varlen(4, 16, 2, (100, 37, 70)) and str(listed) == "100,37,70x4g2x16"
    assert listed.draw(5) == [100, 37, 70]  # listed lengths ignore the seed
    assert parse_shape("fixed100@250x2x16").draw(0) == [100, 100, 50]  # the last one cut
    for dist in ("uniform", "lognormal"):
        shape = parse_shape(f"{dist}512@16384x32g8x128")
        first = shape.draw(0)
        assert sum(first) == 16384 and min(first) >= 1
        assert shape.draw(0) == first and shape.draw(1) != first  # seeded
    assert max(parse_shape("uniform512@16384x4x16").draw(0)) <= 1023


@pytest.mark.parametrize(
    "text, needle",
    [
        ("100,0,5x4x16", "a document of 0 tokens"),
        ("100,-5x4x16", "malformed varlen shape"),
        ("poisson512@4096x4x16", "unknown length distribution 'poisson'"),
        ("lognormalX@4096x4x16", "malformed varlen shape"),  # not the attention shape's words
        ("lognormal@4096x4x16", "malformed varlen shape"),
        ("fixed512@2000000x4x16", "holds 2,000,000 tokens; at most 1,048,576"),
        ("100,37x6g4x16", "K/V heads (4) must divide heads (6)"),
    ],
)
def test_bad_lengths_are_one_line_exit_2(text, needle, tmp_path):
    with pytest.raises(UserError, match=re.escape(needle)):
        parse_shape(text)
    code, err = _cli("run", "--variant", "sdpa-padded", "--shape", text, "--out", str(tmp_path))
    assert code == 2 and needle in err and len(err.strip().splitlines()) == 1, err


def test_a_varlen_shape_belongs_to_the_varlen_variants(tmp_path):
    for variant, shape, needle in [
        ("sdpa", "100,37x4x16", "'sdpa' is an attention variant: give its shape as BxHxSxD"),
        ("sdpa-padded", "1x4x64x16", "'sdpa-padded' is a varlen variant: give its shape as"),
    ]:
        code, err = _cli("run", "--variant", variant, "--shape", shape, "--out", str(tmp_path))
        assert code == 2 and needle in err and len(err.strip().splitlines()) == 1, err


def test_flops_and_padding_waste_by_hand():
    """Documents of 100, 37 and 70 tokens: 5050 + 703 + 2485 = 8238 causal pairs; padded to
    100, three documents of 5050 pairs each are computed, 45.6% of them padding."""
    from compilekit.variants.varlen import padding_waste

    assert causal_pairs([100, 37, 70]) == 8238
    assert padding_waste([100, 37, 70]) == pytest.approx(1 - 8238 / 15150)
    assert padding_waste([64, 64]) == 0.0


def _checked(variant: str, text: str, dtype: str = "float32") -> tuple[float, dict]:
    """(max relative error against the per-document float64 reference, the varlen record)."""
    from compilekit.compile.variant import load_variant
    from compilekit.measure import inputs, workload

    shape = parse_shape(text)
    shape = dataclasses.replace(shape, lengths=tuple(shape.draw(0)))
    found = load_variant(variant)
    made = workload.build(found.factory, variant, shape, dtype, "cpu", 0)
    out = made.fn(*made.inputs)
    ref, what = workload.reference_output(made, made.inputs)
    assert what == "the workload's float64 reference"
    return inputs.max_rel_err(made.unpack(out), ref), made


# lengths 1 and 65 (off every block), GQA 4/2 and plain heads
RAGGED = ["1,65,200,3x4x32", "100,37,70x4g2x16"]


@pytest.mark.parametrize("variant", ["sdpa-padded", "flex-document"])
@pytest.mark.parametrize("text", RAGGED)
def test_variant_matches_the_per_document_reference(variant, text):
    err, made = _checked(variant, text)
    assert err < 1e-5
    lengths = parse_shape(text).lengths
    assert made.flops == 4 * parse_shape(text).heads * parse_shape(text).head_dim * causal_pairs(
        lengths
    )
    assert made.varlen["setup_s"] >= 0
    waste = made.varlen["padding_waste"]
    assert waste > 0.4 if variant == "sdpa-padded" else waste == 0.0


TRITON_VARLEN = r"""
import json, sys
import triton
sys.path.insert(0, ".")
from compilekit.variants import triton_flash_varlen
from tests.variants.test_varlen import _checked
if sys.argv[2:] == ["tma"]:  # K and V through tensor descriptors, as a TMA config loads them
    triton_flash_varlen._varlen_fwd.configs = [
        triton.Config({"BLOCK_N": 64, "TMA": True}, num_warps=1, num_stages=1)
    ]
out = [_checked("triton-flash-varlen", text, dtype)[0] for text, dtype in json.loads(sys.argv[1])]
print(json.dumps(out))
"""


@pytest.mark.parametrize("loads", ["pointers", "tma"])
def test_triton_flash_varlen_through_the_interpreter(loads):
    """Documents shorter than a key block and longer than several, through the pointer loads
    and through tensor descriptors (whose rows past a document read as zeros)."""
    pytest.importorskip("triton", reason="triton not installed (pip install triton numpy)")
    cases = [(RAGGED[0], "float32"), (RAGGED[1], "float16"), ("fixed64@130x8g2x64", "float32")]
    proc = _child(TRITON_VARLEN, json.dumps(cases), loads)
    assert proc.returncode == 0, proc.stderr[-2000:]
    errors = json.loads(proc.stdout.strip().splitlines()[-1])
    assert errors[0] < 1e-5 and errors[1] < 5e-3 and errors[2] < 1e-5, errors


def test_a_path_torch_cannot_run_here_is_unsupported_with_its_reason(tmp_path):
    """sdpa-jagged: torch's CPU math path takes no causal mask on nested tensors."""
    code, err = _cli(
        "run", "--variant", "sdpa-jagged", "--mode", "eager", "--device", "cpu",
        "--shape", RAGGED[1], "--out", str(tmp_path),
    )  # fmt: skip
    assert code == 2 and "cannot run on cpu" in err and "No viable backend" in err, err
    result = json.loads(next(tmp_path.glob("sdpa-jagged__*/result.json")).read_text())
    assert result["status"] == "unsupported"


def test_a_new_batch_under_compile_says_whether_it_recompiled(run_cell):
    """The cell records its documents, and a second batch (one token more on each) makes
    Dynamo compile again, with its reason."""
    result = run_cell("sdpa-padded", "default", shape=RAGGED[1])
    assert result.status == "ok", result.reason
    varlen = result.varlen
    assert varlen["lengths"] == [100, 37, 70] and varlen["distribution"] == "listed"
    assert varlen["padding_waste"] == pytest.approx(1 - 8238 / 15150)
    second = varlen["second_batch"]
    assert second["lengths"] == [101, 38, 71]
    assert second["recompiled"] and "size mismatch" in second["reasons"][0]
    assert second["first_call_s"] > 0
    from compilekit.report import cellview

    notes = "\n".join(cellview.cell_notes(result))
    assert "3 documents of 37..100 tokens" in notes and "recompiled in" in notes


@pytest.mark.parametrize("order", ["document", "work"])
def test_gluon_flash_varlen_deals_every_block_of_every_head_once(order):
    """gluon-flash-varlen's setup: its table holds every document's rows once, in blocks that
    start at 128-row steps from the document's start; its schedule deals each (block, head)
    tile to one program exactly once, and no program carries more than a tile's work over the
    average. Dealt by work, dealing by count would leave two programs 5 key blocks apart (a
    long document's blocks, heaviest first, before short ones); by work, a tile's (2)."""
    from compilekit.variants import gluon_flash_varlen

    lengths, heads, programs = [1, 65, 200, 3, 128, 129, 300, 1000], 4, 5
    blocks, tiles, starts = gluon_flash_varlen.schedule(lengths, heads, 2, CFG, programs, order)
    table = [tuple(blocks[i : i + 3]) for i in range(0, len(blocks), 3)]
    first = [sum(lengths[:i]) for i in range(len(lengths))]
    rows = sorted(s + r for s, n, m in table for r in range(m, min(m + 128, n)))
    assert rows == list(range(sum(lengths)))
    assert all(n in lengths and s == first[lengths.index(n)] and m % 128 == 0 for s, n, m in table)
    assert sorted(tiles) == list(range(len(table) * heads)) and len(starts) == programs + 1
    work = [-(-min(table[t // heads][2] + 128, table[t // heads][1]) // 128) + 1 for t in tiles]
    loads = [sum(work[starts[p] : starts[p + 1]]) for p in range(programs)]
    assert max(loads) <= sum(loads) / programs + max(work)

    _, tiles, starts = gluon_flash_varlen.schedule([1280] + [1] * 60, 1, 1, CFG, 2, order)
    work = [11 - t if t < 10 else 2 for t in tiles]
    loads = [sum(work[starts[p] : starts[p + 1]]) for p in range(2)]
    assert abs(loads[0] - loads[1]) <= 2, loads


def test_gluon_flash_varlen_deals_one_documents_heads_together_longest_first():
    """The default order: each program runs the longest document's tiles before the next
    one's, and a document too long for all its heads' K and V to share L2 (20,000 keys: 8 of
    16 heads a group, launch.l2_group_heads) has one group's tiles run before the next group's.
    Dealt heaviest first across the batch ("work"), documents interleave."""
    from compilekit.variants import gluon_flash_varlen as gv

    lengths, heads = [700, 20000, 3000], 16
    for order, in_order in (("document", True), ("work", False)):
        blocks, tiles, starts = gv.schedule(lengths, heads, 4, CFG, 7, order)
        doc = [blocks[3 * (t // heads) + 1] for t in tiles]
        runs = [doc[starts[p] : starts[p + 1]] for p in range(7)]
        assert all(r == sorted(r, reverse=True) for r in runs) == in_order
    blocks, tiles, starts = gv.schedule(lengths, heads, 4, CFG, 7, "document")
    longest = [t for t in tiles if blocks[3 * (t // heads) + 1] == 20000]
    assert {t % heads // 8 for t in longest} == {0, 1}
    for p in range(7):
        mine = set(tiles[starts[p] : starts[p + 1]])
        groups = [t % heads // 8 for t in longest if t in mine]
        assert groups == sorted(groups)


CFG = {"BLOCK_M": 128, "BLOCK_N": 128, "HEAD_DIM": 128}


def test_gluon_flash_varlen_on_the_cpu_is_unsupported_with_its_reason(tmp_path):
    code, err = _cli(
        "run", "--variant", "gluon-flash-varlen", "--mode", "eager", "--device", "cpu",
        "--shape", RAGGED[1], "--out", str(tmp_path),
    )  # fmt: skip
    assert code == 2 and "gluon-flash-varlen needs" in err, err
    assert len(err.strip().splitlines()) == 1, err
    result = json.loads(next(tmp_path.glob("gluon-flash-varlen__*/result.json")).read_text())
    assert result["status"] == "unsupported"
