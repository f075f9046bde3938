"""On a CUDA GPU (the H200): the blog's cells mapped and timed. Skipped, with the reason, on CPU."""

import functools
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


def test_reduce_overhead_applies_cuda_graphs(run_cell):
    result, _ = _run(run_cell, "naive", "reduce-overhead")
    assert result.cudagraphs["applied"], result.cudagraphs


@pytest.fixture(params=["autotuned", "pointers", "tma"])
def flash_loads(request, monkeypatch):
    """triton-flash with its autotuned configs, or forced to one config that loads K and V
    through pointers, or through TMA descriptors (whichever the autotuner would pick, both
    must be right)."""
    import triton

    from variants import triton_flash as tf

    if request.param != "autotuned":
        config = triton.Config(
            {"BLOCK_M": 64, "BLOCK_N": 64, "TMA": request.param == "tma"},
            num_warps=4,
            num_stages=3,
        )
        monkeypatch.setattr(tf._attn_fwd, "configs", [config])
    monkeypatch.setattr(tf, "_TUNED", {})
    tf._attn_fwd.cache.clear()
    tf._FAST_LAUNCH.clear()
    yield request.param
    tf._attn_fwd.cache.clear()
    tf._FAST_LAUNCH.clear()


@pytest.mark.parametrize("shape", ["2x3x1000x64", "1x8x333x128", "3x5x77x64"])
def test_triton_flash_bf16_awkward_shapes(shape, flash_loads):
    from compilekit.inputs import max_rel_err
    from compilekit.spec import parse_shape
    from variants.masks import reference
    from variants.triton_flash import flash_attention

    b, h, s, d = (getattr(parse_shape(shape), f) for f in ("batch", "heads", "seq", "head_dim"))
    for kv_heads, window in ((h, 0), (1, 0), (h, 7)):
        q = torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16)
        k, v = (torch.randn(b, kv_heads, s, d, device="cuda", dtype=torch.bfloat16) for _ in "kv")
        for _ in range(2):  # the autotuned launch, then the key's fast launch
            out = flash_attention(q, k, v, causal=True, window=window)
            assert max_rel_err(out, reference(q, k, v, causal=True, window=window)) < 3e-2
    # q, k, v as views of one (B, S, 3, H, D) tensor: strided, TMA-readable rows
    q, k, v = torch.randn(b, s, 3, h, d, device="cuda", dtype=torch.bfloat16).unbind(2)
    q, k, v = (t.transpose(1, 2) for t in (q, k, v))
    out = flash_attention(q, k, v, causal=True)
    assert max_rel_err(out, reference(q, k, v, causal=True)) < 3e-2


@pytest.mark.parametrize("schedule", ["single", "ws"])
@pytest.mark.parametrize("shape", ["2x3x1000x64", "1x8x333x128", "3x5x77x64", "1x2x1x64"])
def test_gluon_flash_awkward_shapes(shape, schedule):
    """gluon-flash against float64: sequence lengths off the 128-row tile, GQA, non-causal,
    float16, and strided (B, S, 3, H, D) views, each read through TMA; in both schedules: one
    warpgroup per 64 rows ("single") and warp-specialized ("ws": a loader warp, two consumer
    warpgroups in turn), whichever of them is the default for D."""
    if torch.cuda.get_device_capability()[0] != 9:
        pytest.skip("gluon-flash runs on Hopper (sm90) only")
    from compilekit.inputs import max_rel_err
    from compilekit.spec import parse_shape
    from variants import gluon_flash
    from variants.masks import reference

    b, h, s, d = (getattr(parse_shape(shape), f) for f in ("batch", "heads", "seq", "head_dim"))
    single = gluon_flash.SINGLE_TILES_D128 if d == 128 else {"WS": False}
    tiles = gluon_flash.WS_TILES if schedule == "ws" else single
    flash_attention = functools.partial(gluon_flash.flash_attention, **tiles)
    for kv_heads, causal, dtype in ((h, True, torch.bfloat16), (1, True, torch.bfloat16),
                                    (h, False, torch.float16)):  # fmt: skip
        q = torch.randn(b, h, s, d, device="cuda", dtype=dtype)
        k, v = (torch.randn(b, kv_heads, s, d, device="cuda", dtype=dtype) for _ in "kv")
        out = flash_attention(q, k, v, causal=causal)
        assert max_rel_err(out, reference(q, k, v, causal=causal)) < 3e-2, (kv_heads, causal)
    q, k, v = torch.randn(b, s, 3, h, d, device="cuda", dtype=torch.bfloat16).unbind(2)
    q, k, v = (t.transpose(1, 2) for t in (q, k, v))
    assert max_rel_err(flash_attention(q, k, v), reference(q, k, v, causal=True)) < 3e-2


def test_gluon_flash_fast_launch_runs_the_known_kernel_on_fresh_inputs():
    """A shape's second call launches the compiled kernel it remembered, on descriptors built
    for the new tensors: right against float64 for new values, and a misaligned view of a known
    shape is still refused (it has a key of its own, so it is checked)."""
    if torch.cuda.get_device_capability()[0] != 9:
        pytest.skip("gluon-flash runs on Hopper (sm90) only")
    from compilekit.errors import Unsupported
    from compilekit.inputs import max_rel_err
    from variants import gluon_flash
    from variants.masks import reference

    gluon_flash._FAST_LAUNCH.clear()
    for d in (64, 128):
        shape = (2, 3, 1000, d)
        gluon_flash.attention(
            *(torch.randn(shape, device="cuda", dtype=torch.bfloat16) for _ in "qkv")
        )
        known = len(gluon_flash._FAST_LAUNCH)
        assert known == (1 if d == 64 else 2)
        q, k, v = (torch.randn(shape, device="cuda", dtype=torch.bfloat16) for _ in "qkv")
        out = gluon_flash.attention(q, k, v)
        assert len(gluon_flash._FAST_LAUNCH) == known  # the fast path: no new key
        assert max_rel_err(out, reference(q, k, v, causal=True)) < 3e-2
        flat = torch.randn(q.numel() + 1, device="cuda", dtype=torch.bfloat16)
        with pytest.raises(Unsupported, match="16-byte aligned"):
            gluon_flash.attention(flat[1:].view(shape), k, v)


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


def test_triton_flash_compiles_and_maps_to_its_call_line(run_cell):
    result, kmap = _run(run_cell, "triton-flash", "default")
    assert result.status == "ok", result.reason
    names = [k["name"] for k in kmap["kernels"]]
    assert any("attn_fwd" in n for n in names), names
    lines = [ln for k in kmap["kernels"] for ln in k["source_lines"]]
    assert any(ln["file"].endswith("triton_flash.py") for ln in lines), lines


@pytest.mark.parametrize(
    "variant, mode, shape",
    [
        ("sdpa", "default", BLOG),
        ("sdpa", "default", "1x4x128x64"),
        ("naive", "reduce-overhead", "1x4x128x64"),
        ("triton-flash", "eager", BLOG),
        ("naive", "default", BLOG),
    ],
)
def test_toolkit_timing_matches_a_bare_do_bench(run_cell, cache_root, variant, mode, shape):
    """The toolkit measures the code, not itself: within 5% of do_bench in fresh processes.
    A device-bound cell must read within; a host-bound one (judged by a user's loop, whose time
    follows the host's CPU) may be INCONCLUSIVE where the bare processes disagree, and then
    says so, but never OUTSIDE."""
    from compilekit import verify

    result = run_cell(variant, mode, shape=shape, dtype="bfloat16", device="cuda")
    assert result.measured, result.reason
    report, verdict = verify.verify(result.run_dir, 0.05, cache_root=cache_root)
    print(report)
    if verdict == "inconclusive" and result.host_bound:
        pytest.skip(report)
    assert verdict == "within", report


def test_host_bound_cell_says_so(run_cell):
    result = run_cell("sdpa", "default", shape="1x4x128x64", dtype="bfloat16", device="cuda")
    assert result.host_ms_per_call > 0 and 0 < result.gpu_busy_share <= 1
    assert result.host_bound, (result.gpu_busy_share, result.compiled_loop_ms)
    # a loop pays the host's cost per call, which do_bench's L2 flush may hide
    loops = result.loop_timing
    ratio = loops["compiled"]["median_ms"] / loops["host"]["median_ms"]
    assert ratio >= 0.8, (ratio, loops)
    assert result.eager_loop_ms > 0 and result.loop_timing["compiled"]["calls"] >= 5
