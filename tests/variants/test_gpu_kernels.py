"""On a CUDA GPU (the H200): our kernels at awkward shapes, against float64. Skipped, with
the reason, on CPU."""

import functools

import pytest
import torch

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]


@pytest.fixture(params=["autotuned", "pointers", "tma"])
def flash_loads(request, monkeypatch):
    """triton-flash with its autotuned configs, or forced to one config that loads K and V
    through pointers, or through TMA descriptors (whichever the autotuner would pick, both
    must be right)."""
    import triton

    from compilekit.variants import triton_flash as tf

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
    from compilekit.measure.inputs import max_rel_err
    from compilekit.model.spec import parse_shape
    from compilekit.variants.masks import reference
    from compilekit.variants.triton_flash import flash_attention

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
    from compilekit.measure.inputs import max_rel_err
    from compilekit.model.spec import parse_shape
    from compilekit.variants import gluon_flash
    from compilekit.variants.masks import reference

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


PERSISTENT_CHECK = """
import torch
from compilekit.measure.inputs import max_rel_err
from compilekit.variants import gluon_flash
from compilekit.variants.masks import reference

# fewer tiles than SMs; many tiles a program (causal, heaviest first); GQA, S off the tile,
# non-causal float16; D = 64 too, its default from S = 2048 on, with one query buffer and two
# (Q_STAGES: the loader a tile ahead), 128-row and 64-row key blocks; one-block tiles at S = 77;
# K's ring a slot shorter than V's (SHORT_K: its slots released apart), two slots at the least;
# consumers taking turns on the tensor cores (PINGPONG) and issuing freely
for b, h, kv, s, d, causal, dtype in ((1, 8, 8, 333, 128, True, torch.bfloat16),
                                      (4, 32, 8, 2048, 128, True, torch.bfloat16),
                                      (2, 3, 1, 1000, 128, False, torch.float16),
                                      (2, 6, 2, 2500, 64, True, torch.bfloat16),
                                      (16, 16, 16, 512, 64, True, torch.bfloat16),
                                      (1, 4, 4, 3001, 64, False, torch.float16),
                                      (3, 5, 5, 77, 64, True, torch.bfloat16)):
    q = torch.randn(b, h, s, d, device="cuda", dtype=dtype)
    k, v = (torch.randn(b, kv, s, d, device="cuda", dtype=dtype) for _ in "kv")
    # (query buffers, BLOCK_N, STAGES, SHORT_K, PINGPONG: the consumers take turns)
    rings = (((1, 128, 3, False, True), (2, 128, 3, False, True), (2, 64, 3, False, True),
              (2, 64, 3, True, True), (2, 128, 5, True, True), (2, 128, 4, False, False))
             if d == 64 else ((1, 128, 3, False, True), (2, 128, 3, True, True),
                              (1, 128, 3, True, True), (2, 128, 3, True, False)))
    tile_sets = [{**gluon_flash.PERSISTENT_TILES, "Q_STAGES": q, "BLOCK_N": n, "STAGES": st,
                  "SHORT_K": short_k, "PINGPONG": pingpong}
                 for q, n, st, short_k, pingpong in rings]
    for tiles in tile_sets:
        for _ in range(2):  # the launch, then the key's fast launch
            out = gluon_flash.flash_attention(q, k, v, causal=causal, **tiles)
            err = max_rel_err(out, reference(q, k, v, causal=causal))
            assert err < 3e-2, (b, h, kv, s, d, causal, tiles, err)
# scores that grow key block after key block (K scaled up to 8x along S, Q by 4): rows' running
# maxima climb by many powers of two over a tile, and O is rescaled again and again
for d in (128, 64):
    ramp = torch.linspace(0.1, 8.0, 1500, device="cuda")[:, None]
    q = torch.randn(2, 4, 1500, d, device="cuda", dtype=torch.bfloat16) * 4
    k = (torch.randn(2, 4, 1500, d, device="cuda") * ramp).to(torch.bfloat16)
    v = torch.randn(2, 4, 1500, d, device="cuda", dtype=torch.bfloat16)
    for causal in (True, False):
        persistent = gluon_flash.tiles(d, gluon_flash.PERSISTENT_FROM_SEQ_D64)
        out = gluon_flash.flash_attention(q, k, v, causal=causal, **persistent)
        err = max_rel_err(out, reference(q, k, v, causal=causal))
        assert err < 3e-2, ("growing scores", d, causal, err)
print("ok")
"""


def test_gluon_flash_persistent_schedule_against_float64_in_a_process_of_its_own():
    """The warp-specialized schedule on a persistent grid (PERSISTENT_TILES, the default at
    D = 128 and at D = 64 from S = 2048) against float64: fewer tiles than SMs, many tiles a
    program, GQA, non-causal float16, D = 64 and 128, one query buffer and two, K's ring as
    long as V's and a slot shorter, and scores that climb over a tile. In a child
    process with a time limit: a schedule whose barriers never complete hangs its kernel, and
    fails this test, not the session."""
    import os
    import subprocess
    import sys

    if torch.cuda.get_device_capability()[0] != 9:
        pytest.skip("gluon-flash runs on Hopper (sm90) only")
    from tests.conftest import ROOT

    env = {**os.environ, "PYTHONPATH": os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")])}
    try:
        done = subprocess.run(
            [sys.executable, "-c", PERSISTENT_CHECK], env=env, capture_output=True, text=True,
            timeout=240,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        pytest.fail("the persistent schedule did not finish in 240 s: a barrier never completes")
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stderr[-2000:]


def test_gluon_flash_fast_launch_runs_the_known_kernel_on_fresh_inputs():
    """A shape's second call launches the compiled kernel it remembered, on descriptors built
    for the new tensors (their CUtensorMaps encoded once per set of addresses and kept, on the
    Triton the GPU runs): right against float64 for new values at new addresses, and for new
    values written into tensors it has seen; a misaligned view of a known shape is still
    refused (it has a key of its own, so it is checked)."""
    if torch.cuda.get_device_capability()[0] != 9:
        pytest.skip("gluon-flash runs on Hopper (sm90) only")
    from compilekit.measure.inputs import max_rel_err
    from compilekit.model.errors import Unsupported
    from compilekit.variants import gluon_flash
    from compilekit.variants.masks import reference

    gluon_flash._FAST_LAUNCH.clear()
    for d in (64, 128):
        shape = (2, 3, 1000, d)
        first = [torch.randn(shape, device="cuda", dtype=torch.bfloat16) for _ in "qkv"]
        gluon_flash.attention(*first)  # kept alive: the next inputs lie elsewhere
        known = len(gluon_flash._FAST_LAUNCH)
        assert known == (1 if d == 64 else 2)
        q, k, v = (torch.randn(shape, device="cuda", dtype=torch.bfloat16) for _ in "qkv")
        out = gluon_flash.attention(q, k, v)
        assert len(gluon_flash._FAST_LAUNCH) == known  # the fast path: no new key
        assert max_rel_err(out, reference(q, k, v, causal=True)) < 3e-2
        for t in (q, k, v):  # new values where the kept maps point
            t.copy_(torch.randn_like(t))
        out = gluon_flash.attention(q, k, v)
        assert max_rel_err(out, reference(q, k, v, causal=True)) < 3e-2
        run = list(gluon_flash._FAST_LAUNCH.values())[-1][0]
        # Triton 3.6's launcher: the maps of q's, k's and v's addresses kept, one each (the
        # first call launched through Triton's runner; a Triton whose launcher is laid out
        # otherwise takes Triton's own path every call, and this says so); O's map per output
        # buffer the allocator handed out
        kept = [len(maps) for maps in getattr(run, "kept", ())]
        assert kept[:3] == [1, 1, 1], f"the CUtensorMaps are encoded every call: {kept}"
        flat = torch.randn(q.numel() + 1, device="cuda", dtype=torch.bfloat16)
        with pytest.raises(Unsupported, match="16-byte aligned"):
            gluon_flash.attention(flat[1:].view(shape), k, v)


@pytest.mark.parametrize(
    "shape", ["16x32x1x8192x128", "1x32x3x32768x128", "2x8x1x1000x64", "1x32x1x200x128"]
)
def test_triton_flash_decode_shapes_bf16_eager_and_compiled(shape):
    """The split-KV kernel at decode shapes, GQA 4, eagerly (the autotuned launch, then the
    straight one) and under torch.compile (its triton_op), against the bottom-right float64
    reference."""
    from compilekit.measure.inputs import max_rel_err
    from compilekit.model.spec import parse_shape
    from compilekit.variants import triton_flash_decode as decode
    from compilekit.variants.masks import reference
    from compilekit.variants.triton_flash import flash_attention

    s = parse_shape(shape)
    q = torch.randn(s.batch, s.heads, s.seq, s.head_dim, device="cuda", dtype=torch.bfloat16)
    k, v = (
        torch.randn(s.batch, s.heads // 4, s.keys, s.head_dim, device="cuda", dtype=torch.bfloat16)
        for _ in "kv"
    )
    truth = reference(q, k, v, causal=True)
    assert max_rel_err(flash_attention(q, k, v), truth) < 3e-2
    # the shape's second call launches the tuned kernels straight (launch_known): new inputs
    decode._FAST_LAUNCH.clear()
    flash_attention(q, k, v)
    assert len(decode._FAST_LAUNCH) == 1
    q2, k2, v2 = (torch.randn_like(t) for t in (q, k, v))
    assert max_rel_err(flash_attention(q2, k2, v2), reference(q2, k2, v2, causal=True)) < 3e-2
    compiled = torch.compile(functools.partial(flash_attention, causal=True), fullgraph=True)
    assert max_rel_err(compiled(q, k, v), truth) < 3e-2


@pytest.mark.parametrize(
    "shape", [(1, 32, 8, 8192), (4, 32, 8, 2048), (16, 32, 8, 8192), (1, 32, 8, 32768)]
)
def test_the_split_kernels_last_program_combines_in_every_call_and_in_a_cuda_graph(
    shape, monkeypatch
):
    """The one launch: the last program of each (batch, K/V head) to finish combines the
    splits, through arrival counters every call leaves at 0. Fifty calls in a row on fresh
    inputs (a program combining before every split is written shows as a wrong output), then
    the call captured in a CUDA graph and replayed on new inputs. Where the last program
    combines in one step (batched shapes) it is the eager path's own; at batch 1 (several
    steps) that path launches the second kernel, and the one launch is asked for (fused=True),
    which is not kept for the fast path."""
    from compilekit.measure.inputs import max_rel_err
    from compilekit.variants import flash_decode_combine as combine
    from compilekit.variants import triton_flash_decode as decode
    from compilekit.variants.masks import reference
    from compilekit.variants.triton_flash import flash_attention

    class Refused:
        def __getitem__(self, grid):
            raise AssertionError("the second combine kernel was launched for the one launch")

    batch, heads, kv_heads, keys = shape
    q = torch.randn(batch, heads, 1, 128, device="cuda", dtype=torch.bfloat16)
    k, v = (
        torch.randn(batch, kv_heads, keys, 128, device="cuda", dtype=torch.bfloat16) for _ in "kv"
    )
    tiles = combine.last_tiles(heads // kv_heads, 128, decode.plan(q, k)["num_splits"])
    own = tiles["CHUNK"] == tiles["BLOCK_S"]  # the eager path's choice: one step, one launch
    assert decode.plan(q, k)["num_splits"] > 1 and own == (batch > 1)
    decode._FAST_LAUNCH.clear()
    # the two kernels asked for eagerly (a comparison's launch) give the same and are not kept
    two = decode.launch(q, k, v, True, fused=False)
    assert max_rel_err(two, reference(q, k, v, causal=True)) < 3e-2 and not decode._FAST_LAUNCH
    if not own:  # the eager path's own at this shape: two kernels, kept for the fast path
        assert max_rel_err(flash_attention(q, k, v), reference(q, k, v, causal=True)) < 3e-2
        assert len(decode._FAST_LAUNCH) == 1
        decode._FAST_LAUNCH.clear()
    call = flash_attention if own else functools.partial(decode.launch, causal=True, fused=True)
    monkeypatch.setattr(decode, "combine_kernel", Refused())
    _fifty_calls_then_a_graph(call, q, k, v)
    assert len(decode._FAST_LAUNCH) == int(own)
    assert int(combine._COUNTERS[q.device].abs().sum()) == 0


def _fifty_calls_then_a_graph(call, q, k, v):
    """call(q, k, v) fifty times on fresh inputs, then captured in a CUDA graph and replayed
    twenty times on fresh inputs, each output against the float64 reference."""
    from compilekit.measure.inputs import max_rel_err
    from compilekit.variants.masks import reference

    for _ in range(50):  # the first launch autotunes; the rest launch straight (launch_known)
        q.normal_(), k.normal_(), v.normal_()
        assert max_rel_err(call(q, k, v), reference(q, k, v, causal=True)) < 3e-2
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        call(q, k, v)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = call(q, k, v)
    for _ in range(20):
        q.normal_(), k.normal_(), v.normal_()
        graph.replay()
        assert max_rel_err(out, reference(q, k, v, causal=True)) < 3e-2


@pytest.mark.parametrize("batch", [1, 16])
def test_the_combine_kernel_as_a_programmatic_dependent_launch_waits_for_the_splits(
    batch, monkeypatch
):
    """pdl=True on Hopper: the combine kernel is launched with launch_pdl, its programs start
    while the split kernel runs and wait for its writes (griddepcontrol.wait). A program that
    read the partials early shows as a wrong output in one of fifty calls or graph replays."""
    from compilekit.variants import flash_decode_combine as combine
    from compilekit.variants import triton_flash_decode as decode

    q = torch.randn(batch, 32, 1, 128, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(batch, 8, 8192, 128, device="cuda", dtype=torch.bfloat16) for _ in "kv")
    if not combine.pdl_ok(q.device):
        pytest.skip("programmatic dependent launch needs a Hopper GPU and Triton 3.4+")
    kernel, options = decode.combine_kernel, []

    class Seen:  # the combine kernel, its launch options kept
        def __getitem__(self, grid):
            def run(*args, **kwargs):
                options.append(kwargs.get("launch_pdl", False))
                return kernel[grid](*args, **kwargs)

            return run

    monkeypatch.setattr(decode, "combine_kernel", Seen())
    decode._FAST_LAUNCH.clear()
    _fifty_calls_then_a_graph(
        functools.partial(decode.launch, causal=True, pdl=True, fused=False), q, k, v
    )
    assert options and all(options) and not decode._FAST_LAUNCH


def test_triton_flash_over_a_static_cache_in_a_cuda_graph_reads_each_replays_lengths():
    """cached_attention eagerly (a long cache, several splits, and a short one, one split) and
    under reduce-overhead: the lengths are a device tensor, so one graph serves every step,
    each replay attending to the keys its lengths name (empty slots hold NaN)."""
    from compilekit.measure.inputs import max_rel_err
    from compilekit.variants.masks import reference
    from compilekit.variants.triton_flash import cached_attention

    def check(out, q, k, v, lens):
        for row, n in enumerate(lens.tolist()):
            one = slice(row, row + 1)
            truth = reference(q[one], k[one, :, :n], v[one, :, :n], causal=True)
            assert max_rel_err(out[row : row + 1], truth) < 3e-2, (row, n)

    for capacity in (8192, 232):
        q = torch.randn(2, 32, 1, 128, device="cuda", dtype=torch.bfloat16)
        k, v = (
            torch.randn(2, 8, capacity, 128, device="cuda", dtype=torch.bfloat16) for _ in "kv"
        )
        lens = torch.tensor([capacity // 3, capacity - 1], device="cuda", dtype=torch.int32)
        for row, n in enumerate(lens.tolist()):
            k[row, :, n:], v[row, :, n:] = float("nan"), float("nan")
        check(cached_attention(q, k, v, lens), q, k, v, lens)
        check(cached_attention(q, k, v, lens), q, k, v, lens)  # the straight launch
        step = torch.compile(cached_attention, mode="reduce-overhead", fullgraph=True)
        for n in (5, 60, capacity // 3):  # shorter than any filled row: each replay its own
            lens.fill_(n)
            out = step(q, k, v, lens).clone()
            check(out, q, k, v, lens)


@pytest.mark.parametrize(
    "variant",
    [
        "triton-flash-varlen", "triton-flash-varlen:tma", "sdpa-jagged", "varlen-attn",
        "gluon-flash-varlen",
    ],
)  # fmt: skip
def test_varlen_kernels_bf16_eager_and_compiled(variant, monkeypatch):
    """Lognormal documents (lengths off every block), GQA 32/8: eagerly and compiled, against
    the per-document float64 reference; `:tma`, triton-flash-varlen held to a config that
    loads K and V through tensor descriptors."""
    import dataclasses

    import triton

    from compilekit.compile.variant import load_variant
    from compilekit.measure import inputs, workload
    from compilekit.model.spec import parse_shape
    from compilekit.variants import triton_flash_varlen

    if variant.startswith("gluon") and torch.cuda.get_device_capability()[0] != 9:
        pytest.skip("gluon-flash-varlen runs on Hopper (sm90) only")
    if variant.endswith(":tma"):
        variant = variant.removesuffix(":tma")
        config = triton.Config({"BLOCK_N": 64, "TMA": True}, num_warps=8, num_stages=3)
        monkeypatch.setattr(triton_flash_varlen._varlen_fwd, "configs", [config])
        triton_flash_varlen._varlen_fwd.cache.clear()
        assert triton_flash_varlen.tma_ok(
            *(torch.empty(8, 4, 128, device="cuda", dtype=torch.bfloat16),) * 3
        )

    shape = parse_shape("lognormal300@4096x32g8x128")
    shape = dataclasses.replace(shape, lengths=tuple(shape.draw(0)))
    found = load_variant(variant)
    made = workload.build(found.factory, variant, shape, "bfloat16", "cuda", 0)
    truth, _ = workload.reference_output(made, made.inputs)
    assert inputs.max_rel_err(made.unpack(made.fn(*made.inputs)), truth) < 3e-2
    compiled = torch.compile(made.fn)
    assert inputs.max_rel_err(made.unpack(compiled(*made.inputs)), truth) < 3e-2
    triton_flash_varlen._varlen_fwd.cache.clear()  # no config of this test's kept for the next


@pytest.mark.parametrize("dim, dtype", [(64, "float16"), (128, "bfloat16")])
def test_gluon_flash_varlen_at_every_documents_edge(dim, dtype, monkeypatch):
    """gluon-flash-varlen over documents of 1 token, shorter than a consumer's 64 rows, one row
    either side of 64 and 128, several blocks long, and one that ends the packed batch, GQA
    8/2: against the per-document float64 reference, eagerly (twice: the descriptors made
    anew over the same inputs) and compiled, then with its tiles dealt in its other order; the
    rows of the documents around a short one stay its neighbours' (a store past a document's
    end would overwrite them)."""
    if torch.cuda.get_device_capability()[0] != 9:
        pytest.skip("gluon-flash-varlen runs on Hopper (sm90) only")
    from compilekit.compile.variant import load_variant
    from compilekit.measure import inputs, workload
    from compilekit.model.spec import parse_shape

    shape = parse_shape(f"1,700,63,64,65,1,127,128,129,3,300,2000,5x8g2x{dim}")
    found = load_variant("gluon-flash-varlen")
    made = workload.build(found.factory, "gluon-flash-varlen", shape, dtype, "cuda", 0)
    truth, _ = workload.reference_output(made, made.inputs)
    for _ in range(2):
        assert inputs.max_rel_err(made.unpack(made.fn(*made.inputs)), truth) < 3e-2
    compiled = torch.compile(made.fn, fullgraph=True)
    assert inputs.max_rel_err(made.unpack(compiled(*made.inputs)), truth) < 3e-2
    from compilekit.variants import gluon_flash_varlen

    monkeypatch.setattr(gluon_flash_varlen, "ORDER", "work")
    made = workload.build(found.factory, "gluon-flash-varlen", shape, dtype, "cuda", 0)
    assert inputs.max_rel_err(made.unpack(made.fn(*made.inputs)), truth) < 3e-2


@pytest.mark.parametrize("schedule", ["single", "ws", "persistent"])
def test_gluon_flash_tiles_in_small_l2_groups(schedule, monkeypatch):
    """gluon-flash with its tiles in groups of two rows of B x H (a last one short), against
    float64: every tile runs once, in each schedule (causal and not, GQA). The shapes are this
    test's own, so no launch remembered from another test skips the grouping."""
    if torch.cuda.get_device_capability()[0] != 9:
        pytest.skip("gluon-flash runs on Hopper (sm90) only")
    from compilekit.measure.inputs import max_rel_err
    from compilekit.variants import gluon_flash
    from compilekit.variants.masks import reference

    asked = []
    monkeypatch.setattr(gluon_flash, "l2_group_heads", lambda *a: asked.append(a) or 2)
    tiles = {
        "single": {"WS": False},
        "ws": gluon_flash.WS_TILES,
        "persistent": gluon_flash.PERSISTENT_TILES,
    }[schedule]
    d = 64 if schedule == "single" else 128
    for b, h, kv_heads, s, causal in ((1, 5, 5, 331, True), (3, 3, 1, 203, True),
                                      (1, 5, 5, 331, False)):  # fmt: skip
        q = torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16)
        k, v = (torch.randn(b, kv_heads, s, d, device="cuda", dtype=torch.bfloat16) for _ in "kv")
        out = gluon_flash.flash_attention(q, k, v, causal=causal, **tiles)
        assert max_rel_err(out, reference(q, k, v, causal=causal)) < 3e-2, (b, h, s, causal)
    assert asked  # the launches took their groups from l2_group_heads
