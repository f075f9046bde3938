"""gluon-flash without a GPU: what it refuses, and the schedule its kernel compiles to for sm90.

The kernel needs a Hopper GPU to run (tests/variants/test_gpu_kernels.py runs it there); here Triton compiles it
for sm90 ahead of time, which needs no GPU, and the PTX is read for the overlap the variant
exists for. Skipped, with the reason, where Triton or its Gluon is not installed.
"""

import re

import pytest
import torch

from compilekit.model.errors import Unsupported


def _fake_cuda(*shape, dtype=torch.bfloat16):
    return torch.empty(*shape, device="cuda", dtype=dtype)


@pytest.fixture
def gluon_flash(monkeypatch):
    from compilekit.variants import gluon_flash

    if gluon_flash.gl is None:
        pytest.skip(f"no Gluon here: {gluon_flash._NO_GLUON}")
    return gluon_flash


def test_refuses_a_cpu_tensor_with_the_reason(gluon_flash):
    q = torch.randn(1, 2, 64, 64, dtype=torch.bfloat16)
    with pytest.raises(Unsupported, match="needs a Hopper GPU"):
        gluon_flash.attention(q, q, q)


def test_refuses_what_its_kernel_does_not_compute(gluon_flash, monkeypatch):
    from torch._subclasses.fake_tensor import FakeTensorMode

    capability = [(9, 0)]
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: capability[0])
    with FakeTensorMode():
        good = _fake_cuda(2, 8, 333, 128)
        gluon_flash.check_inputs(good, _fake_cuda(2, 2, 333, 128), _fake_cuda(2, 2, 333, 128))
        cases = {
            "head dims 64 and 128": (_fake_cuda(1, 2, 64, 96),) * 3,
            "bfloat16 or float16": (_fake_cuda(1, 2, 64, 64, dtype=torch.float32),) * 3,
            "must divide query heads": (
                _fake_cuda(1, 4, 64, 64),
                _fake_cuda(1, 3, 64, 64),
                _fake_cuda(1, 3, 64, 64),
            ),
            "last dim must be contiguous": (_fake_cuda(1, 2, 64, 64).transpose(2, 3),) * 3,
        }
        for reason, (q, k, v) in cases.items():
            with pytest.raises(Unsupported, match=reason):
                gluon_flash.check_inputs(q, k, v)
        capability[0] = (10, 0)  # Blackwell has no wgmma
        with pytest.raises(Unsupported, match=r"Hopper \(sm90\) only.*sm10x"):
            gluon_flash.check_inputs(good, good, good)


def _schedule(ptx: str, n_scores: int, n_out: int) -> str:
    """The kernel's wgmma groups and waits in the PTX's text order: 'S' (a group of q kT
    wgmmas, instruction width n_scores), 'O' (P V, width n_out), 'wait N' (wgmma.wait_group N),
    'arrive' (an mbarrier arrive that expects no bytes)."""
    steps, width = [], None
    pattern = (
        r"wgmma\.mma_async\.sync\.aligned\.m64n(\d+)k|wgmma\.commit_group"
        r"|wait_group\.sync\.aligned (\d+)|(mbarrier\.arrive\.shared)"
    )
    for m in re.finditer(pattern, ptx):
        if m[1]:
            width = int(m[1])
        elif m[2]:
            steps.append(f"wait {m[2]}")
        elif m[3]:
            steps.append("arrive")
        else:
            steps.append({n_scores: "S", n_out: "O"}[width])
    return " ".join(steps)


def _sm90_ptx(gluon_flash, fn, q_rows: int, head_dim: int = 128, **consts) -> str:
    """The PTX Triton compiles `fn` (a gluon-flash kernel) to for sm90, ahead of time, bf16,
    at head_dim, with `consts` (its constexprs); skips where this Triton compiles no Gluon."""
    return _sm90_kernel(gluon_flash, fn, q_rows, head_dim, **consts).asm["ptx"]


def _sm90_kernel(gluon_flash, fn, q_rows: int, head_dim: int = 128, **consts):
    """_sm90_ptx's compiled kernel (its PTX, its metadata: shared memory, ...)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.runtime.jit import mangle_type

    try:
        from triton.experimental.gluon._runtime import GluonASTSource
    except ImportError as exc:
        pytest.skip(f"this Triton compiles no Gluon ahead of time: {exc}")
    names = fn.arg_names
    consts = dict(SM_SCALE=head_dim**-0.5, HEAD_DIM=head_dim, CAUSAL=True, **consts)
    if "VARLEN" in names:  # the persistent kernel: dense unless asked
        consts.setdefault("VARLEN", False)
    signature = {n: "constexpr" if n in consts else "i32" for n in names}
    # the launcher's own names for the descriptors' types (block shape and layout included)
    qkv = torch.empty(2, 4, 256, head_dim, dtype=torch.bfloat16)
    # O's descriptor is Q's kind: the same box over a tensor of q's shape
    signature["q_desc"] = signature["o_desc"] = mangle_type(gluon_flash._descriptor(qkv, q_rows))
    kv = mangle_type(gluon_flash._descriptor(qkv, consts["BLOCK_N"]))
    signature["k_desc"] = signature["v_desc"] = kv
    for name in ("Tiles", "Starts", "Blocks"):  # the persistent grid's schedule, varlen's table
        if name in signature:
            signature[name] = "*i32"
    if "Out" in signature:  # varlen's output, a document's last rows stored from registers
        signature["Out"] = "*bf16"
    src = GluonASTSource(
        fn=fn,
        signature=signature,
        constexprs={(names.index(n),): value for n, value in consts.items()},
    )
    options = {"num_warps": consts["num_warps"]}
    return triton.compile(src, target=GPUTarget("cuda", 90, 32), options=options)


def _ptxas_log(ptx: str) -> str:
    """ptxas -v's report on `ptx` assembled for sm90a (registers, spills), from Triton's own
    ptxas; skips where it has none."""
    import os
    import subprocess
    import tempfile

    from tests.variants.sm90_sass import ptxas

    path = ptxas()
    if path is None:
        pytest.skip("this Triton brings no ptxas")
    with tempfile.TemporaryDirectory() as folder:
        src = os.path.join(folder, "kernel.ptx")
        with open(src, "w") as f:
            f.write(ptx)
        done = subprocess.run(
            [path, "-v", "--gpu-name", "sm_90a", src, "-o", src + ".cubin"],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr[-1000:]
    return done.stdout + done.stderr


def _sm90_ptx_of(gluon_flash, tiles: dict, head_dim: int = 128) -> str:
    """_sm90_ptx of the kernel that runs tile settings `tiles` (gluon_flash.schedule_of)."""
    return _sm90_kernel_of(gluon_flash, tiles, head_dim).asm["ptx"]


def _sm90_kernel_of(gluon_flash, tiles: dict, head_dim: int = 128):
    """_sm90_kernel of the kernel that runs tile settings `tiles` (gluon_flash.schedule_of)."""
    kernel, q_rows, _ = gluon_flash.schedule_of(tiles)
    consts = {k: v for k, v in tiles.items() if k not in gluon_flash.SCHEDULE_FLAGS}
    return _sm90_kernel(gluon_flash, kernel, q_rows, head_dim, **consts)


def _ptxas_spills(ptx: str) -> int:
    """The bytes ptxas spills to local memory for `ptx` (PTX itself names no spill: register
    allocation is ptxas's)."""
    return int(re.search(r"(\d+) bytes spill stores", _ptxas_log(ptx))[1])


@pytest.mark.parametrize("tiles", ["WS_TILES", "SINGLE_TILES_D128"])
def test_sm90_d128_tiles_keep_their_state_in_registers(gluon_flash, tiles):
    """D = 128's 64 x 128 score and output tiles, the softmax's P and the running state fit a
    consumer's registers: ptxas spills nothing (a spill in the loop is a local-memory round
    trip per key block; carrying P in fp32 into the next block's wgmmas spilled 80 bytes)."""
    ptx = _sm90_ptx_of(gluon_flash, getattr(gluon_flash, tiles))
    assert _ptxas_spills(ptx) == 0


def test_sm90_d128_default_spills_no_more_than_when_it_was_timed(gluon_flash):
    """tiles(128), the persistent grid with two query buffers and a short K ring by default:
    ptxas spills 100 bytes there (24 with one query buffer and equal rings), as when it was
    timed at 1.00-1.04x the kernel before it on the H200. A change that spills more is to be
    timed before it becomes the default."""
    ptx = _sm90_ptx_of(gluon_flash, gluon_flash.tiles(128))
    assert _ptxas_spills(ptx) <= 100


def test_sm90_d128_short_k_ring_makes_room_for_a_second_query_buffer(gluon_flash):
    """At D = 128 two query buffers fit an SM's 227 KiB only beside a K ring a slot shorter
    than V's (SHORT_K): 224 KiB with it, 256 with equal rings of three."""
    short = _sm90_kernel_of(gluon_flash, gluon_flash.tiles(128))
    assert gluon_flash.tiles(128)["Q_STAGES"] == 2
    assert 0 < short.metadata.shared <= 227 * 1024
    equal = _sm90_kernel_of(gluon_flash, {**gluon_flash.tiles(128), "SHORT_K": False})
    assert equal.metadata.shared > 227 * 1024


@pytest.mark.parametrize("dim, seq", [(64, 512), (64, 8192), (128, 4096)])
def test_sm90_defaults_store_o_through_tma(gluon_flash, dim, seq):
    """Every default schedule writes O as FA3 does: staged in shared memory, then one TMA
    store per warpgroup and tile, and no store from registers to global memory (4-byte stores
    from the wgmma layout were 7-8% slower at the small D = 64 shapes)."""
    ptx = _sm90_ptx_of(gluon_flash, gluon_flash.tiles(dim, seq), head_dim=dim)
    warpgroups = 1 if ".reqntid 128" in ptx else 2
    assert len(re.findall(r"cp\.async\.bulk\.tensor\.\dd\.global\.shared", ptx)) == warpgroups
    assert "st.global" not in ptx


@pytest.mark.parametrize("dim", [64, 128])
def test_sm90_varlen_build_stores_a_documents_last_rows_from_registers(gluon_flash, dim):
    """gluon-flash-varlen's build of the persistent kernel (VARLEN): a tile's O leaves by TMA
    as the dense kernel's does, or, where a document ends within its rows, by stores from
    registers (masked: the rows past its end are the next document's); its consumers spill no
    more than the dense build's, on the same shared memory."""
    tiles = gluon_flash.tiles(dim, 1 << 30)
    dense = _sm90_kernel_of(gluon_flash, tiles, head_dim=dim)
    kernel, q_rows, _ = gluon_flash.schedule_of(tiles)
    consts = {k: v for k, v in tiles.items() if k not in gluon_flash.SCHEDULE_FLAGS}
    varlen = _sm90_kernel(gluon_flash, kernel, q_rows, dim, VARLEN=True, **consts)
    ptx = varlen.asm["ptx"]
    assert len(re.findall(r"cp\.async\.bulk\.tensor\.\dd\.global\.shared", ptx)) == 2
    assert "st.global" in ptx and "st.global" not in dense.asm["ptx"]
    assert _ptxas_spills(ptx) <= _ptxas_spills(dense.asm["ptx"])
    assert varlen.metadata.shared == dense.metadata.shared


@pytest.mark.parametrize("seq, threads", [(512, 128), (8192, 384)])
def test_sm90_d64_defaults_keep_their_state_in_registers(gluon_flash, seq, threads):
    """D = 64's defaults, 64-row tiles on one warpgroup at S = 512 and the persistent
    warp-specialized grid (12 warps) at S = 8192 (tiles(64, S)), compile for sm90 with nothing
    spilled, as when they were timed."""
    ptx = _sm90_ptx_of(gluon_flash, gluon_flash.tiles(64, seq), head_dim=64)
    assert _ptxas_spills(ptx) == 0
    assert f".reqntid {threads}" in ptx


def test_sm90_d64_short_tiles_fit_four_programs_an_sm(gluon_flash):
    """D = 64's 64-row tiles below S = 2048 (tiles(64, 512)) take at most a quarter of an
    H100/H200 SM's 228 KiB of shared memory, less the 1 KiB the SM keeps each program: four
    programs an SM, as triton-flash's 64 x 64 tiles. With equal K and V rings the barriers took
    32 bytes past it and three programs fitted: 0.0491 ms against 0.0456 at 16x16x512x64."""
    compiled = _sm90_kernel_of(gluon_flash, gluon_flash.tiles(64, 512), head_dim=64)
    assert 0 < compiled.metadata.shared <= 228 * 1024 // 4 - 1024


def test_sm90_schedule_overlaps_softmax_with_the_tensor_cores(gluon_flash):
    """The main loop issues S_j, then O += P_{j-1} V_{j-1} behind it, and waits for S_j alone
    (one wgmma group, O's, left in flight) before block j's softmax: FA3's overlap. (The PTX
    places the loop's blocks out of program order, so the test reads the loop's head.)"""
    ptx = _sm90_ptx(
        gluon_flash, gluon_flash._gluon_attn_fwd, 128,
        BLOCK_M=128, BLOCK_N=64, STAGES=3, num_warps=8,
    )  # fmt: skip
    assert _ptxas_spills(ptx) == 0, "registers spill to local memory"
    steps = _schedule(ptx, n_scores=64, n_out=128)
    assert "S O wait 1" in steps, steps


def test_sm90_free_issue_softmax_runs_beside_its_own_p_v_in_the_sass(gluon_flash):
    """FREE_ISSUE_TILES_D128 (consumers without turns) as ptxas scheduled it: in each
    consumer's key-block loop every exp2 of block j's softmax issues before the wait for
    P_{j-1} V_{j-1}, the overlap that schedule is for. The PTX asks for that order in every
    schedule, but ptxas hoists the wait to the top of the softmax's basic block unless a branch
    ends that block (dev/gluon_ptxas.py --order)."""
    from tests.variants import sm90_sass

    if sm90_sass.tools() is None:
        pytest.skip("this Triton brings no ptxas and nvdisasm")
    bodies = sm90_sass.key_block_bodies(
        _sm90_ptx_of(gluon_flash, gluon_flash.FREE_ISSUE_TILES_D128)
    )
    assert len(bodies) == 2  # a loop per consumer
    for body in bodies:
        before, total = sm90_sass.exp2_before_full_wait(body)
        assert total >= 64 and before == total, sm90_sass.order(body)


def test_sm90_warp_specialized_schedule_takes_turns(gluon_flash):
    """The warp-specialized kernel: 12 warps (consumer 0, consumer 1, the loader warp padded to
    a warpgroup), registers moved from the loader to the consumers (setmaxnreg), and in each
    consumer's loop S_j and P_{j-1} V_{j-1} issued, the turn handed over, then the wait for
    S_j alone."""
    ptx = _sm90_ptx(
        gluon_flash, gluon_flash._gluon_attn_fwd_ws, 64,
        BLOCK_M=128, BLOCK_N=64, STAGES=3, num_warps=4,
    )  # fmt: skip
    assert _ptxas_spills(ptx) == 0, "registers spill to local memory"
    assert ".reqntid 384" in ptx
    assert re.search(r"setmaxnreg\.dec\.sync\.aligned\.u32\s+40;", ptx), "loader keeps its regs"
    steps = _schedule(ptx, n_scores=64, n_out=128)
    assert steps.count("S O arrive wait 1") == 2, steps  # one loop per consumer


def test_sm90_persistent_schedule_keeps_the_turns_in_each_consumers_loop(gluon_flash):
    """The persistent warp-specialized kernel (PERSISTENT_TILES): the same 12 warps and the
    same loop in each consumer as the one-tile kernel (S_j and P_{j-1} V_{j-1} issued, the turn
    handed over, the wait for S_j alone), inside each program's loop over its tiles."""
    # BLOCK_N 64: S's wgmmas then read apart from P V's (n64, n128)
    ptx = _sm90_ptx_of(gluon_flash, {**gluon_flash.PERSISTENT_TILES, "BLOCK_N": 64})
    assert ".reqntid 384" in ptx
    steps = _schedule(ptx, n_scores=64, n_out=128)
    assert steps.count("S O arrive wait 1") == 2, steps


def test_the_fast_launch_key_tells_apart_what_the_kernel_is_specialized_on(gluon_flash):
    """A known key's calls skip check_inputs and Triton's dispatch: inputs that differ in
    anything the compiled kernel or those checks depend on must not share a key; the same
    layout with other values must."""
    q, k, v = (torch.randn(2, 4, 96, 64, dtype=torch.bfloat16) for _ in "qkv")

    def key(q=q, k=k, v=v, causal=True, overrides=None):
        return gluon_flash.launch_key(q, k, v, causal, overrides or {})

    assert key() == key(q=torch.randn_like(q), k=torch.randn_like(k), v=torch.randn_like(v))
    strided = torch.randn(2, 96, 3, 4, 64, dtype=torch.bfloat16).unbind(2)[0].transpose(1, 2)
    misaligned = torch.randn(2 * 4 * 96 * 64 + 1, dtype=torch.bfloat16)[1:].view(2, 4, 96, 64)
    others = [
        key(q=torch.randn(2, 4, 97, 64, dtype=torch.bfloat16)),  # S
        key(k=k[:, :1], v=v[:, :1]),  # GQA: the K/V heads
        key(q=q.half(), k=k.half(), v=v.half()),  # dtype
        key(v=v.half()),  # one dtype off: check_inputs refuses it, so it must miss
        key(q=strided),  # strides
        key(q=misaligned),  # 2-byte offset: TMA needs 16-byte aligned rows
        key(causal=False),
        key(overrides=gluon_flash.WS_TILES),
    ]
    assert len(set(others + [key()])) == len(others) + 1, others


def test_compiled_gluon_flash_calls_its_op_on_every_call(gluon_flash, monkeypatch):
    """Under torch.compile the kernel is an opaque op (compilekit::gluon_flash_attention, on a
    Library): Inductor calls it as a fallback, and every compiled call runs the module's
    launch. Here on CPU, the launch stood in for."""
    calls = []

    def launch_known(q, k, v, causal, overrides):
        calls.append(causal)
        return q * 2

    monkeypatch.setattr(gluon_flash, "_launch_known", launch_known)
    torch._dynamo.reset()
    compiled = torch.compile(lambda q, k, v: gluon_flash._gluon_op(q, k, v, True) + 1)
    q = torch.ones(1, 1, 4, 64)
    for _ in range(2):
        assert compiled(q, q, q).unique().tolist() == [3.0]
    assert calls == [True, True]


def test_each_named_tile_set_runs_its_own_schedule_over_any_default(gluon_flash):
    """A tile set passed as overrides merges into tiles(D, S): each names its schedule, so a
    one-program-per-tile set runs that kernel where the default is the persistent grid."""
    kernels = {
        "WS_TILES": gluon_flash._gluon_attn_fwd_ws,
        "SINGLE_TILES_D128": gluon_flash._gluon_attn_fwd,
        "PERSISTENT_TILES": gluon_flash._gluon_attn_fwd_wsp,
        "PERSISTENT_TILES_D128": gluon_flash._gluon_attn_fwd_wsp,
    }
    for dim, seq in ((64, 512), (64, 8192), (128, 512)):
        for name, kernel in kernels.items():
            cfg = {**gluon_flash.tiles(dim, seq), **getattr(gluon_flash, name)}
            assert gluon_flash.schedule_of(cfg)[0] is kernel, (dim, seq, name)


def test_a_known_keys_descriptors_are_its_first_calls_over_the_new_tensors(gluon_flash):
    """The fast path's descriptors: the template the key's first call built, over each call's
    tensor, equal to one built (and checked) anew; the kept template holds no tensor."""
    first, later = (torch.randn(2, 3, 100, 64, dtype=torch.bfloat16) for _ in "ab")
    template = gluon_flash._rebased(gluon_flash._descriptor(first, 64), None)
    assert template.base is None
    rebased = gluon_flash._rebased(template, later)
    assert rebased == gluon_flash._descriptor(later, 64) and rebased.base is later
    assert template.base is None
