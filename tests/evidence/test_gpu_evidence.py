"""On a CUDA GPU (the H200): the blog's cells mapped and diagnosed. Skipped, with the reason,
on CPU."""

import json
import os

import pytest
import torch

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]
BLOG = "8x16x1024x64"


def _run(run_cell, variant, mode):
    result = run_cell(variant, mode, shape=BLOG, dtype="bfloat16", device="cuda")
    assert result.measured, result.reason
    with open(os.path.join(result.run_dir, "kernels.json")) as f:
        return result, json.load(f)


def test_naive_default_two_bmm_one_fused_kernel_all_mapped(run_cell):
    result, kmap = _run(run_cell, "naive", "default")
    real = [k for k in kmap["kernels"] if k["kind"] != "memcpy"]
    assert sorted(k["kind"] for k in real) == ["extern", "extern", "generated"]
    assert all(k["source_lines"] and k["device_ms"] > 0 for k in real)
    fused = next(k for k in real if k["kind"] == "generated")
    assert fused["name"].startswith("triton_") and fused["source_file"].endswith(".py")
    total = sum(k["device_ms"] * k["calls_per_forward"] for k in kmap["kernels"])
    assert total == pytest.approx(result.compiled_ms, rel=0.10)


def test_flex_template_kernel_maps_to_the_flex_call(run_cell):
    _, kmap = _run(run_cell, "flex", "default")
    template = [k for k in kmap["kernels"] if k["name"].startswith("triton_tem_fused")]
    assert len(template) == 1 and template[0]["kind"] == "template"
    assert any("flex_attention(" in ln["code"] for ln in template[0]["source_lines"])


def test_sdpa_cudnn_names_its_kernel(run_cell):
    result, kmap = _run(run_cell, "sdpa-cudnn", "eager")
    assert result.sdpa_backend == "cudnn"
    assert any("cudnn" in k["name"] and k["kind"] == "library" for k in kmap["kernels"])


@pytest.mark.parametrize("variant", ["sdpa-cudnn", "sdpa-flash"])
def test_an_sdpa_kernels_flops_come_from_its_op(run_cell, variant):
    """cuDNN's op launches its kernel, flash's launches it through _flash_attention_forward:
    either way the kernel's FLOPs are the SDPA call's (causal), not the variant's declared."""
    from compilekit.model.spec import parse_shape
    from compilekit.variants.masks import causal_flops

    _, kmap = _run(run_cell, variant, "eager")
    attention = next(k for k in kmap["kernels"] if k["kind"] == "library")
    assert attention["flops"] == causal_flops(parse_shape(BLOG)), attention
    assert "flops_from" not in attention and attention["roofline"]["bound"] in (
        "compute",
        "memory",
    )


def test_reduce_overhead_applies_cuda_graphs(run_cell):
    result, _ = _run(run_cell, "naive", "reduce-overhead")
    assert result.cudagraphs["applied"], result.cudagraphs


def test_a_cuda_graph_pools_memory_shows_under_reduce_overhead_and_not_eager(run_cell):
    """The naive graph's scores (8x16x1024x1024 bf16: 256 MiB) live in the graph's pool."""
    result, _ = _run(run_cell, "naive", "reduce-overhead")
    eager, compiled = result.memory["eager"], result.memory["compiled"]
    assert compiled["cudagraph_pools"]["reserved_mb"] >= 256, compiled
    assert "cudagraph_pools" not in eager and eager["peak_allocated_mb"] >= 256 + 3 * 16
    assert 0 <= compiled["fragmentation"] < 1 and 0 <= eager["fragmentation"] < 1
    assert result.peak_memory_mb == compiled["peak_allocated_mb"]
    # a replay allocates nothing: no split block of the default pool is the forward's own (the
    # timing's 244 MiB L2-flush buffer, split by a block kept after it, once read as one)
    assert compiled["inactive_split_mb"] < 64, compiled


def test_naive_eagers_masked_fill_kernels_take_its_line(run_cell):
    """Out-of-place masked_fill launches from ops inside it (clone's copy_, masked_fill_):
    its kernels take naive.py's masked_fill line through the op around them."""
    _, kmap = _run(run_cell, "naive", "eager")
    inner = [k for k in kmap["kernels"] if k["launcher"] in ("aten::copy_", "aten::masked_fill_")]
    assert inner, [k["launcher"] for k in kmap["kernels"]]
    for k in inner:
        assert "masked_fill" in k["origin_lines"][0]["code"], k
        assert "around the launching op" in k["source_via"], k


def test_profile_reads_the_allocators_peak_over_the_users_block():
    """A 64 MiB tensor made and dropped inside the block, beside 4 MiB held before it."""
    import compilekit

    x = torch.ones(1024, 1024, device="cuda")
    with compilekit.profile(device="cuda") as p:
        y = x.repeat(16, 1)
        del y
    block = p.memory["block"]
    assert block["peak_allocated_mb"] >= 64 + 4 and p.peak_memory_mb == block["peak_allocated_mb"]
    assert 0 <= block["fragmentation"] < 1 and "peak allocated MiB" in p.table(by="memory")


def test_a_forwards_memory_timeline_names_the_scores_by_their_op_and_line(run_cell):
    """naive default: the 256 MiB scores are the largest tensor live at the peak, made by a
    bmm at the variant's matmul(q, k) line; the snapshot is one memory_viz opens (a pickle)."""
    import pickle

    from compilekit.evidence import timeline

    result, _ = _run(run_cell, "naive", "default")
    found = timeline.load(result.run_dir, result)
    with open(os.path.join(result.run_dir, timeline.SNAPSHOT), "rb") as f:
        assert pickle.load(f)["device_traces"]
    scores = [t for t in found["largest_at_peak"] if t["mb"] >= 256 and "bmm" in t["op"]]
    assert scores, found["largest_at_peak"]
    assert scores[0]["file"].endswith("naive.py") and "matmul(q" in scores[0]["code"], scores
    assert found["peak_allocated_mb"] >= found["before_allocated_mb"] + 256


def test_a_replays_kernels_are_placed_from_the_output_code(run_cell):
    """The replay's kernels record no tensors: the two bmm and the fused softmax take their
    bytes (the bmm their FLOPs) from their calls in the output code, as default's take them
    from the profiler, and every one of them has a place on the roofline."""
    from compilekit.evidence import codecost

    _, replayed = _run(run_cell, "naive", "reduce-overhead")
    _, launched = _run(run_cell, "naive", "default")
    real = [k for k in replayed["kernels"] if k["kind"] in ("extern", "generated")]
    assert len(real) == 3 and all(k["roofline"]["bound"] for k in real), real
    assert all(k["bytes_from"] == codecost.CODE_BYTES_FROM for k in real)
    flops = [
        sorted(k["flops"] for k in m["kernels"] if k["kind"] == "extern")
        for m in (replayed, launched)
    ]
    assert flops[0] == flops[1] == [2 * 128 * 1024 * 1024 * 64] * 2, flops


def test_a_replayed_blocks_matmuls_are_not_charged_to_its_attention(run_cell):
    """Under reduce-overhead every kernel of the replay hangs under the one compiled region's
    op: on an H100 the map put a block's GEMMs (one cuBLAS name) on the query projection's line,
    and a Llama block read 88-91% attention and 0% matmuls where default mode read 37-39%. A
    replay's shares are default's, within a few points."""
    pytest.importorskip("transformers")
    shares = {}
    for mode in ("default", "reduce-overhead"):
        result = run_cell("llama-block", mode, shape="1x512", dtype="bfloat16", device="cuda")
        assert result.measured, result.reason
        shares[mode] = result.time_shares
    assert shares["reduce-overhead"]["matmuls"] > 0.2, shares
    assert abs(shares["reduce-overhead"]["attention"] - shares["default"]["attention"]) < 0.1


def test_gluon_flash_runs_compiled_as_an_opaque_op(run_cell):
    if torch.cuda.get_device_capability()[0] != 9:
        pytest.skip("gluon-flash runs on Hopper (sm90) only")
    result, kmap = _run(run_cell, "gluon-flash", "default")
    assert result.status == "ok", result.reason
    assert any("gluon_attn_fwd" in k["name"] for k in kmap["kernels"]), kmap["kernels"]


def test_gluon_flash_eager_kernel_maps_to_its_definition(run_cell):
    """Eagerly gluon-flash launches its kernel raw (no torch op names it): the kernel map
    gives the kernel's definition in gluon_flash.py instead of no line at all."""
    if torch.cuda.get_device_capability()[0] != 9:
        pytest.skip("gluon-flash runs on Hopper (sm90) only")
    result, kmap = _run(run_cell, "gluon-flash", "eager")
    assert result.status == "ok", result.reason
    kernel = next(k for k in kmap["kernels"] if "gluon_attn_fwd" in k["name"])
    assert kernel["source_via"] == "the kernel's definition (launched outside any torch op)"
    line = kernel["source_lines"][0]
    assert line["file"].endswith("gluon_flash.py") and line["code"].startswith("def _gluon_attn")


def test_reduce_overhead_replay_costs_at_the_blog_shape(run_cell):
    """What each reduce-overhead call pays besides the graph: the inputs copied into its
    buffers (q, k, v at 16 MiB each in bf16, naive's 1024 x 1024 bool mask at 1 MiB)."""
    result, kmap = _run(run_cell, "naive", "reduce-overhead")
    assert result.cudagraphs["applied"], result.cudagraphs
    replay = result.replay
    assert replay["input_copy_launches_per_call"] == 4 == replay["inputs_recorded_non_static"]
    # torch 2.11's profiler records no dtypes: the cell's bf16 (2 bytes) stands in for the bool
    mib = 49.0 if replay["bytes_dtypes"] == "recorded" else 50.0
    assert replay["input_copy_mib"] == mib, replay
    assert 0 < replay["input_copy_ms"] < replay["graph_gpu_ms"]
    assert replay["recordings"] >= 1 and replay["rerecords"] == 0
    assert "4 input(s) copied per call by 4 kernel launch(es) (copy_, " in replay["note"]


def test_static_inputs_spare_the_replay_the_copies_of_q_k_and_v(run_cell):
    """Under the static_inputs option the CUDA graph reads the cell's q, k and v in place: of
    naive's four copies per replay only its mask's (a tensor the variant made) is left."""
    result = run_cell(
        "naive", "reduce-overhead", shape=BLOG, dtype="bfloat16", device="cuda",
        config={"static_inputs": True},
    )  # fmt: skip
    assert result.status == "ok" and result.cudagraphs["applied"], result.reason
    replay = result.replay
    assert replay["input_copy_launches_per_call"] == 1 == replay["inputs_recorded_non_static"]
    assert replay["recordings"] >= 1 and replay["rerecords"] == 0


def test_triton_flash_compiles_and_maps_to_its_call_line(run_cell):
    result, kmap = _run(run_cell, "triton-flash", "default")
    assert result.status == "ok", result.reason
    names = [k["name"] for k in kmap["kernels"]]
    assert any("attn_fwd" in n for n in names), names
    lines = [ln for k in kmap["kernels"] for ln in k["source_lines"]]
    assert any(ln["file"].endswith("triton_flash.py") for ln in lines), lines


def test_host_bound_cell_says_so(run_cell):
    result = run_cell("sdpa", "default", shape="1x4x128x64", dtype="bfloat16", device="cuda")
    assert result.host_ms_per_call > 0 and 0 < result.gpu_busy_share <= 1
    assert result.host_bound, (result.gpu_busy_share, result.compiled_loop_ms)
    # a loop pays the host's cost per call, which do_bench's L2 flush may hide
    loops = result.loop_timing
    ratio = loops["compiled"]["median_ms"] / loops["host"]["median_ms"]
    assert ratio >= 0.8, (ratio, loops)
    assert result.eager_loop_ms > 0 and result.loop_timing["compiled"]["calls"] >= 5


@pytest.mark.parametrize("mode", ["eager", "default"])
def test_a_gathers_bytes_are_the_rows_it_reads_not_its_table(run_cell, mode):
    """A tiny BERT's embeddings on the GPU: eagerly the kernel's launcher is the index_select
    inside aten::embedding (its dim a concrete input), compiled a Triton kernel whose launch
    records the whole table. Either way it is counted the 16 rows it reads of 1000."""
    tiny = os.path.join(os.path.dirname(__file__), "..", "variants", "tiny_models.py")
    result = run_cell(f"{tiny}:bert_one_layer", mode, shape="1x16", dtype="bfloat16",
                      device="cuda")  # fmt: skip
    assert result.measured, result.reason
    with open(os.path.join(result.run_dir, "kernels.json")) as f:
        records = json.load(f)["kernels"]
    gathers = [r for r in records if "index_select" in r["launcher"] or "embedding" in r["name"]]
    # less than the word table alone; at least the 16 rows each writes
    assert gathers and all(16 * 64 * 2 <= r["bytes"] < 1000 * 64 * 2 for r in gathers), gathers
