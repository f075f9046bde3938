"""The blog's last step on Hopper: causal flash attention forward in Gluon (sm90 only).

Gluon is Triton's lower-level language: layouts, shared memory, barriers, TMA and the async
tensor-core MMA (wgmma) are the kernel's to schedule. That buys what triton-flash cannot say
(it reached 0.83x cuDNN at D = 128): for key block j the kernel issues S_j = q kT, then the
previous block's O += P_{j-1} V_{j-1} behind it, and waits for S_j alone, so block j's exp and
row sums may run while the tensor cores compute P_{j-1} V_{j-1} (FA3's intra-warpgroup overlap;
Triton waits for both before every softmax). ptxas decides: it hoists the wait for P V above
the softmax unless a branch ends the softmax's basic block, which only FREE_ISSUE_TILES_D128
has (dev/gluon_ptxas.py --order). K and V stream through a ring of STAGES
shared-memory slots filled by TMA, from host-side descriptors over [B, H, S, D] whose box is one
head's rows (rows past S read as zeros, as do Q's). O leaves the same way, FA3's epilogue: staged
in its rows' query buffer, then one TMA store (7-8% faster than 4-byte stores from the wgmma
layout at the small D = 64 shapes on an H100). Descriptors built on the device per program
cost 0.022 ms of 0.108 at 8x16x1024x64 on the H200: the host builds them.

One program: BLOCK_M query rows of one (batch, head). Two schedules:
- D = 64 below S = 2048, the one above: 64 query rows on one warpgroup (4 warps), more
  programs per SM.
- D = 128, FA3's (WS_TILES): gl.warp_specialize gives the TMA loads to one producer warp, and two
  consumer warpgroups (64 query rows each) take turns issuing their wgmmas, each handing the
  turn over before its own softmax, so one's exp work runs while the other's matrix work does.
- The same on a persistent grid (PERSISTENT_TILES, the default at D = 128, and at D = 64 from
  S = 2048 on, where it is 10-11% faster at S = 6000-16384): one program per SM takes
  tile after tile, and its loader fetches the next tile's Q and K/V while the consumers finish
  the last one. The host deals the tiles, heaviest first under a causal mask, each to the
  program with the least work so far (launch.persistent_schedule). Dealt round-robin, the
  busiest program carried 12-21% over the average by a count of key blocks, and the grid lost
  4.5% at 1x32x8192x128; dealt this way it is 4-8% faster than WS_TILES at S = 3072-4096.
On the H200 (bf16, causal, the kernel sweep's cells: experiments/results/h200/kernel/): D = 128,
1.08-1.16x cuDNN at 2x32x4096x128, 1x32x8192x128 (595 TFLOP/s), 3x24x3072x128 and GQA
1x32x4096x128, 609 TFLOP/s at 4x16x16384x128; D = 64, 1.07x at 16x16x512x64 and 1.10x at
8x16x1024x64 (64-row tiles, four programs an SM since K's ring is a slot shorter than V's,
in L2 groups of at most 32 (batch, head) rows), 1.14x at 2x8x6000x64 (persistent).
Supports causal and non-causal, GQA, any sequence length, D = 64 or 128, bfloat16 or float16,
inputs whose last dim is contiguous. Anything else, and any machine but a Hopper GPU, is refused
with the reason (the cell records `unsupported`). Under torch.compile it is an opaque op
(compilekit::gluon_flash_attention, on a torch.library.Library): Inductor calls it, CUDA graphs
capture it.
FLOPs: variants.masks.attention_flops (causal: 4·B·H·D·S(S+1)/2).
"""

import math

import torch

from compilekit.model.errors import Unsupported
from compilekit.variants.launch import (
    LaunchCache,
    descriptor_launcher,
    l2_group_heads,
    persistent_schedule,
    tensor_key,
)
from compilekit.variants.masks import causal_flops as flops  # noqa: F401  (FLOPs this variant does)
from compilekit.variants.masks import (
    check_shapes,
    reference,  # noqa: F401  (the variant's float64 truth)
)

DESCRIPTION = (
    "hand-written Gluon flash attention for Hopper (TMA ring, wgmma overlapped with softmax)"
)

try:
    import triton
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.language.nvidia.hopper import (
        fence_async_shared,
        mbarrier,
        tma,
        warpgroup_mma,
        warpgroup_mma_wait,
    )

    # Triton 3.6 (torch 2.11) names the TMA copies async_copy_global_to_shared and
    # async_copy_shared_to_global; later ones async_load and async_store
    _tma_load = getattr(tma, "async_load", None) or tma.async_copy_global_to_shared
    _tma_store = getattr(tma, "async_store", None) or tma.async_copy_shared_to_global
    _NO_GLUON = None
except (ImportError, AttributeError) as exc:  # a CPU torch without triton; a Triton before Gluon
    gl = None
    _NO_GLUON = f"{type(exc).__name__}: {exc}"

if gl is not None:

    @gluon.jit
    def _issue_kv(
        k_desc, v_desc, k_smem, v_smem, bars, off_z, off_kvh, j,
        STAGES: gl.constexpr, BLOCK_N: gl.constexpr,
    ):  # fmt: skip
        """Start the TMA copies of key block j's K and V rows into ring slot j % STAGES."""
        slot = j % STAGES
        _issue_kv_slot(
            k_desc, v_desc, k_smem, v_smem, bars, off_z, off_kvh, j * BLOCK_N, slot, slot
        )

    @gluon.jit
    def _issue_kv_short_k(
        k_desc, v_desc, k_smem, v_smem, bars, off_z, off_kvh, j,
        STAGES: gl.constexpr, BLOCK_N: gl.constexpr,
    ):  # fmt: skip
        """_issue_kv into a K ring one slot shorter than V's: key block j's K into K slot
        j % (STAGES - 1), its V into V slot j % STAGES, barrier j % STAGES."""
        _issue_kv_slot(
            k_desc, v_desc, k_smem, v_smem, bars, off_z, off_kvh, j * BLOCK_N, j % STAGES,
            j % (STAGES - 1),
        )  # fmt: skip

    @gluon.jit
    def _issue_q(q_desc, q_smem, q_bar, off_z, off_h, start_m, BLOCK_M: gl.constexpr):
        """Start the TMA copy of query tile start_m's rows into q_smem."""
        mbarrier.expect(q_bar, q_desc.block_type.nbytes)
        _tma_load(q_desc, [off_z, off_h, start_m * BLOCK_M, 0], q_bar, _as_box(q_smem))

    @gluon.jit
    def _issue_kv_slot(k_desc, v_desc, k_smem, v_smem, bars, off_z, off_kvh, row, slot, k_slot):
        """Start the TMA copies of the key block from key row `row` on, its K and V rows into
        K's ring slot `k_slot` and V's `slot`, both counted on barrier `slot`."""
        bar = bars.index(slot)
        mbarrier.expect(bar, k_desc.block_type.nbytes + v_desc.block_type.nbytes)
        at = [off_z, off_kvh, row, 0]
        _tma_load(k_desc, at, bar, _as_box(k_smem.index(k_slot)))
        _tma_load(v_desc, at, bar, _as_box(v_smem.index(slot)))

    @gluon.jit
    def _as_box(tile):
        """A [rows, D] shared tile seen as the descriptors' [1, 1, rows, D] box (same bytes)."""
        return tile.reshape([1, 1, tile.shape[0], tile.shape[1]])

    @gluon.jit
    def _tile_of(pid, BH, n_m, L2_HEADS, CAUSAL: gl.constexpr):
        """(B*H row, query block) of tile number pid: rows in groups of L2_HEADS (their K and V
        fit in L2: variants.launch.l2_group_heads), every query block of a group before the
        next group's, the group's rows varying fastest; under a causal mask the query blocks
        last-first (most keys first: longest-processing-time order)."""
        first = pid // (L2_HEADS * n_m) * L2_HEADS
        size = gl.minimum(L2_HEADS, BH - first)
        r = pid - first * n_m
        block = r // size
        if CAUSAL:
            block = n_m - 1 - block
        return first + r % size, block

    @gluon.jit
    def _masked(s, j, offs_m, offs_n, N_CTX, CAUSAL: gl.constexpr, BLOCK_N: gl.constexpr):
        cols = j * BLOCK_N + offs_n
        keep = cols[None, :] < N_CTX
        if CAUSAL:
            keep = keep & (offs_m[:, None] >= cols[None, :])
        return gl.where(keep, s, float("-inf"))

    @gluon.jit
    def _softmax(s, m_i, l_i, qk_scale, dtype: gl.constexpr):
        """(p, m_new, l_new, alpha) for one block's raw scores s against the running state, p in
        the inputs' dtype as the P V wgmma reads it. p lives on into the next block's wgmmas: in
        fp32 it held 32 more registers a thread beside S and O, and the D = 128 consumers
        (64 x 128 tiles) spilled (ptxas: 80 bytes; dev/gluon_ptxas.py)."""
        m_new = gl.maximum(m_i, gl.max(s, 1) * qk_scale)
        p = gl.exp2(s * qk_scale - m_new[:, None])
        alpha = gl.exp2(m_i - m_new)
        return p.to(dtype), m_new, l_i * alpha + gl.sum(p, 1), alpha

    @gluon.jit
    def _store_o(o, l_i, o_desc, o_smem, off_z, off_h, row0, o_layout: gl.constexpr):
        """O / l for the query rows from row0 on of head (off_z, off_h), through `o_smem` (the
        rows' query buffer, which no wgmma reads any more) and a TMA store, as FA3 stores O: one
        bulk copy instead of a 4-byte store per pair of columns, rows past S clipped by the
        descriptor. Returns once the copy has read o_smem, which may then be refilled."""
        o_smem.store(_normalized(o, l_i, o_layout).to(o_desc.block_type.element_ty))
        fence_async_shared()  # the generic-proxy writes above, before the async proxy reads
        _tma_store(o_desc, [off_z, off_h, row0, 0], _as_box(o_smem))
        tma.store_wait(0)

    @gluon.jit
    def _store_o_rows(
        o, l_i, Out, stride_t, stride_h, off_h, row0, row_end,
        ROWS: gl.constexpr, HEAD_DIM: gl.constexpr, o_layout: gl.constexpr,
    ):  # fmt: skip
        """O / l for the query rows row0 .. row0 + ROWS of head off_h of a packed output
        [T, H, D], those before row_end alone, stored from registers: a document's last tile,
        whose rows past its end are the next document's (a TMA store clips only at T)."""
        o = _normalized(o, l_i, o_layout)
        rows = row0 + gl.arange(0, ROWS, layout=gl.SliceLayout(1, o_layout))
        cols = gl.arange(0, HEAD_DIM, layout=gl.SliceLayout(0, o_layout))
        at = rows.to(gl.int64)[:, None] * stride_t + off_h * stride_h + cols[None, :]
        # the column test is always true: it gives the mask O's full shape and layout
        keep = (rows[:, None] < row_end) & (cols[None, :] < HEAD_DIM)
        gl.store(Out + at, o.to(Out.dtype.element_ty), mask=keep)

    @gluon.jit
    def _normalized(o, l_i, o_layout: gl.constexpr):
        """O / l, in O's layout; a row that saw no key (l = 0) stays 0."""
        l_o = gl.convert_layout(l_i, gl.SliceLayout(1, o_layout))
        return o / gl.where(l_o == 0.0, 1.0, l_o)[:, None]

    @gluon.jit
    def _gluon_attn_fwd(
        q_desc, k_desc, v_desc, o_desc,
        H, KV_GROUP, N_CTX, L2_HEADS,
        SM_SCALE: gl.constexpr,
        HEAD_DIM: gl.constexpr,
        CAUSAL: gl.constexpr,
        BLOCK_M: gl.constexpr,
        BLOCK_N: gl.constexpr,
        STAGES: gl.constexpr,
        num_warps: gl.constexpr,
    ):  # fmt: skip
        gl.static_assert(STAGES >= 3, "the ring needs a slot for blocks j-1, j and j+1")
        dtype: gl.constexpr = o_desc.block_type.element_ty
        # S = Q K^T and O = P V on the tensor cores, rows split over the warps
        s_layout: gl.constexpr = gl.NVMMADistributedLayout(
            version=[3, 0], warps_per_cta=[num_warps, 1], instr_shape=[16, BLOCK_N, 16]
        )
        o_layout: gl.constexpr = gl.NVMMADistributedLayout(
            version=[3, 0], warps_per_cta=[num_warps, 1], instr_shape=[16, HEAD_DIM, 16]
        )
        p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
        tile_layout: gl.constexpr = gl.NVMMASharedLayout(
            swizzle_byte_width=128, element_bitwidth=16
        )

        off_hz, start_m = _tile_of(
            gl.program_id(1) * gl.num_programs(0) + gl.program_id(0),
            gl.num_programs(0), gl.num_programs(1), L2_HEADS, CAUSAL,
        )  # fmt: skip
        off_z = off_hz // H
        off_h = off_hz % H
        off_kvh = off_h // KV_GROUP

        q_smem = gl.allocate_shared_memory(dtype, [BLOCK_M, HEAD_DIM], tile_layout)
        # K's ring is a slot shorter than V's: block j's K is read by S_j alone, done before
        # block j + 1's step refills its slot, V's by P_j V_j a step later. The slot saved is
        # what lets four 64 x 64 programs share an SM (four then need 200 KB of its 228, with
        # equal rings 230 KB)
        k_smem = gl.allocate_shared_memory(dtype, [STAGES - 1, BLOCK_N, HEAD_DIM], tile_layout)
        v_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, HEAD_DIM], tile_layout)
        q_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
        bars = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
        mbarrier.init(q_bar, count=1)
        for i in gl.static_range(STAGES):
            mbarrier.init(bars.index(i), count=1)

        hi = N_CTX
        if CAUSAL:
            hi = gl.minimum((start_m + 1) * BLOCK_M, N_CTX)
        n_blocks = gl.cdiv(hi, BLOCK_N)
        # blocks from here on cross the diagonal or the end of the sequence: they need the mask
        first_masked = N_CTX // BLOCK_N
        if CAUSAL:
            first_masked = gl.minimum(first_masked, start_m * BLOCK_M // BLOCK_N)

        _issue_q(q_desc, q_smem, q_bar, off_z, off_h, start_m, BLOCK_M)
        for i in gl.static_range(STAGES - 1):  # prefetch: block i into slot i
            if i < n_blocks:
                _issue_kv_short_k(
                    k_desc, v_desc, k_smem, v_smem, bars, off_z, off_kvh, i, STAGES, BLOCK_N
                )

        offs_m = start_m * BLOCK_M + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, s_layout))
        offs_n = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, s_layout))
        qk_scale = SM_SCALE * 1.4426950408889634
        zero_s = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, layout=s_layout)
        m_i = gl.full([BLOCK_M], float("-inf"), gl.float32, layout=gl.SliceLayout(1, s_layout))
        l_i = gl.zeros([BLOCK_M], gl.float32, layout=gl.SliceLayout(1, s_layout))
        o = gl.zeros([BLOCK_M, HEAD_DIM], gl.float32, layout=o_layout)

        # block 0: its scores, then its softmax (nothing to overlap it with yet)
        mbarrier.wait(q_bar, 0)
        mbarrier.wait(bars.index(0), 0)
        s = warpgroup_mma(
            q_smem, k_smem.index(0).permute((1, 0)), zero_s, use_acc=False, is_async=True
        )
        s = warpgroup_mma_wait(0, deps=(s,))
        if first_masked == 0:
            s = _masked(s, 0, offs_m, offs_n, N_CTX, CAUSAL, BLOCK_N)
        p, m_i, l_i, alpha = _softmax(s, m_i, l_i, qk_scale, dtype)

        for j in range(1, n_blocks):
            # refill V's slot of block j-2 (read by O at j-1) and K's of block j-1 (by S at j-1)
            if j + STAGES - 2 < n_blocks:
                nxt = j + STAGES - 2
                _issue_kv_short_k(
                    k_desc, v_desc, k_smem, v_smem, bars, off_z, off_kvh, nxt, STAGES, BLOCK_N
                )
            slot = j % STAGES
            mbarrier.wait(bars.index(slot), (j // STAGES) & 1)
            # S_j on the tensor cores, then O += P_{j-1} V_{j-1} behind it ...
            k_j = k_smem.index(j % (STAGES - 1)).permute((1, 0))
            s = warpgroup_mma(q_smem, k_j, zero_s, use_acc=False, is_async=True)
            p_op = gl.convert_layout(p, p_layout)
            o = warpgroup_mma(p_op, v_smem.index((j - 1) % STAGES), o, is_async=True)
            # ... wait for S_j only (O may still run) and do block j's softmax meanwhile
            s = warpgroup_mma_wait(1, deps=(s,))
            if j >= first_masked:
                s = _masked(s, j, offs_m, offs_n, N_CTX, CAUSAL, BLOCK_N)
            p, m_i, l_i, alpha = _softmax(s, m_i, l_i, qk_scale, dtype)
            o, p_op = warpgroup_mma_wait(0, deps=(o, p_op))
            o = o * gl.convert_layout(alpha, gl.SliceLayout(1, o_layout))[:, None]

        # the last block's P V
        p_op = gl.convert_layout(p, p_layout)
        o = warpgroup_mma(p_op, v_smem.index((n_blocks - 1) % STAGES), o, is_async=True)
        o, p_op = warpgroup_mma_wait(0, deps=(o, p_op))

        mbarrier.invalidate(q_bar)
        for i in gl.static_range(STAGES):
            mbarrier.invalidate(bars.index(i))

        _store_o(o, l_i, o_desc, q_smem, off_z, off_h, start_m * BLOCK_M, o_layout)

    @gluon.jit
    def _ws_loader(
        q_desc, k_desc, v_desc, q_smem, k_smem, v_smem, q_bar, ready, empty,
        off_z, off_h, off_kvh, start_m, n_blocks,
        BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, STAGES: gl.constexpr,
    ):  # fmt: skip
        """The producer warp: both halves of the query tile, then every key block's K and V
        into the ring, a slot refilled once both consumers have released it."""
        HALF: gl.constexpr = BLOCK_M // 2
        mbarrier.expect(q_bar, 2 * q_desc.block_type.nbytes)
        _tma_load(q_desc, [off_z, off_h, start_m * BLOCK_M, 0], q_bar, _as_box(q_smem.index(0)))
        _tma_load(
            q_desc, [off_z, off_h, start_m * BLOCK_M + HALF, 0], q_bar, _as_box(q_smem.index(1))
        )
        for j in range(n_blocks):
            slot = j % STAGES
            if j >= STAGES:  # the block STAGES back must be released by both consumers
                mbarrier.wait(empty.index(slot), ((j // STAGES) - 1) & 1)
            _issue_kv(k_desc, v_desc, k_smem, v_smem, ready, off_z, off_kvh, j, STAGES, BLOCK_N)

    @gluon.jit
    def _ws_consumer(
        c: gl.constexpr, q_smem, k_smem, v_smem, q_bar, ready, empty, turn, o_desc,
        off_z, off_h, start_m, n_blocks, first_masked, N_CTX,
        SM_SCALE: gl.constexpr, HEAD_DIM: gl.constexpr, CAUSAL: gl.constexpr,
        BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, STAGES: gl.constexpr,
    ):  # fmt: skip
        """One warpgroup: query rows c*64 .. c*64+63 of the tile, against every key block. It
        issues its tensor-core work only on its turn and hands the turn over right after, so
        one warpgroup's softmax runs while the other's wgmmas do."""
        HALF: gl.constexpr = BLOCK_M // 2
        dtype: gl.constexpr = o_desc.block_type.element_ty
        s_layout: gl.constexpr = gl.NVMMADistributedLayout(
            version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, BLOCK_N, 16]
        )
        o_layout: gl.constexpr = gl.NVMMADistributedLayout(
            version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, HEAD_DIM, 16]
        )
        p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
        q = q_smem.index(c)
        row0 = start_m * BLOCK_M + c * HALF
        offs_m = row0 + gl.arange(0, HALF, layout=gl.SliceLayout(1, s_layout))
        offs_n = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, s_layout))
        qk_scale = SM_SCALE * 1.4426950408889634
        zero_s = gl.zeros([HALF, BLOCK_N], gl.float32, layout=s_layout)
        m_i = gl.full([HALF], float("-inf"), gl.float32, layout=gl.SliceLayout(1, s_layout))
        l_i = gl.zeros([HALF], gl.float32, layout=gl.SliceLayout(1, s_layout))
        o = gl.zeros([HALF, HEAD_DIM], gl.float32, layout=o_layout)

        mbarrier.wait(q_bar, 0)
        mbarrier.wait(ready.index(0), 0)
        mbarrier.wait(turn.index(c), 0)
        s = warpgroup_mma(q, k_smem.index(0).permute((1, 0)), zero_s, use_acc=False, is_async=True)
        mbarrier.arrive(turn.index(1 - c))
        s = warpgroup_mma_wait(0, deps=(s,))
        if first_masked == 0:
            s = _masked(s, 0, offs_m, offs_n, N_CTX, CAUSAL, BLOCK_N)
        p, m_i, l_i, alpha = _softmax(s, m_i, l_i, qk_scale, dtype)

        for j in range(1, n_blocks):
            slot = j % STAGES
            mbarrier.wait(ready.index(slot), (j // STAGES) & 1)
            mbarrier.wait(turn.index(c), j & 1)
            s = warpgroup_mma(
                q, k_smem.index(slot).permute((1, 0)), zero_s, use_acc=False, is_async=True
            )
            p_op = gl.convert_layout(p, p_layout)
            o = warpgroup_mma(p_op, v_smem.index((j - 1) % STAGES), o, is_async=True)
            mbarrier.arrive(turn.index(1 - c))
            s = warpgroup_mma_wait(1, deps=(s,))
            if j >= first_masked:
                s = _masked(s, j, offs_m, offs_n, N_CTX, CAUSAL, BLOCK_N)
            p, m_i, l_i, alpha = _softmax(s, m_i, l_i, qk_scale, dtype)
            o, p_op = warpgroup_mma_wait(0, deps=(o, p_op))
            mbarrier.arrive(empty.index((j - 1) % STAGES))  # block j-1's K and V: done
            o = o * gl.convert_layout(alpha, gl.SliceLayout(1, o_layout))[:, None]

        p_op = gl.convert_layout(p, p_layout)
        o = warpgroup_mma(p_op, v_smem.index((n_blocks - 1) % STAGES), o, is_async=True)
        o, p_op = warpgroup_mma_wait(0, deps=(o, p_op))

        _store_o(o, l_i, o_desc, q, off_z, off_h, row0, o_layout)

    @gluon.jit
    def _gluon_attn_fwd_ws(
        q_desc, k_desc, v_desc, o_desc,
        H, KV_GROUP, N_CTX, L2_HEADS,
        SM_SCALE: gl.constexpr,
        HEAD_DIM: gl.constexpr,
        CAUSAL: gl.constexpr,
        BLOCK_M: gl.constexpr,
        BLOCK_N: gl.constexpr,
        STAGES: gl.constexpr,
        num_warps: gl.constexpr,
    ):  # fmt: skip
        gl.static_assert(num_warps == 4, "the default partition is one consumer warpgroup")
        gl.static_assert(STAGES >= 2, "each consumer holds blocks j-1 and j")
        dtype: gl.constexpr = o_desc.block_type.element_ty
        HALF: gl.constexpr = BLOCK_M // 2
        tile_layout: gl.constexpr = gl.NVMMASharedLayout(
            swizzle_byte_width=128, element_bitwidth=16
        )
        off_hz, start_m = _tile_of(
            gl.program_id(1) * gl.num_programs(0) + gl.program_id(0),
            gl.num_programs(0), gl.num_programs(1), L2_HEADS, CAUSAL,
        )  # fmt: skip
        off_z = off_hz // H
        off_h = off_hz % H
        off_kvh = off_h // KV_GROUP
        hi = N_CTX
        if CAUSAL:
            hi = gl.minimum((start_m + 1) * BLOCK_M, N_CTX)
        n_blocks = gl.cdiv(hi, BLOCK_N)
        first_masked = N_CTX // BLOCK_N
        if CAUSAL:
            first_masked = gl.minimum(first_masked, start_m * BLOCK_M // BLOCK_N)

        q_smem = gl.allocate_shared_memory(dtype, [2, HALF, HEAD_DIM], tile_layout)
        k_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, HEAD_DIM], tile_layout)
        v_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, HEAD_DIM], tile_layout)
        q_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
        ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
        empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
        turn = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
        mbarrier.init(q_bar, count=1)
        for i in gl.static_range(STAGES):
            mbarrier.init(ready.index(i), count=1)
            mbarrier.init(empty.index(i), count=2)  # one release per consumer
        mbarrier.init(turn.index(0), count=1)
        mbarrier.init(turn.index(1), count=1)
        mbarrier.arrive(turn.index(0))  # consumer 0 has the first turn

        gl.warp_specialize(
            [
                (
                    _ws_consumer,
                    (
                        0,
                        q_smem,
                        k_smem,
                        v_smem,
                        q_bar,
                        ready,
                        empty,
                        turn,
                        o_desc,
                        off_z,
                        off_h,
                        start_m,
                        n_blocks,
                        first_masked,
                        N_CTX,
                        SM_SCALE,
                        HEAD_DIM,
                        CAUSAL,
                        BLOCK_M,
                        BLOCK_N,
                        STAGES,
                    ),
                ),
                (
                    _ws_consumer,
                    (
                        1,
                        q_smem,
                        k_smem,
                        v_smem,
                        q_bar,
                        ready,
                        empty,
                        turn,
                        o_desc,
                        off_z,
                        off_h,
                        start_m,
                        n_blocks,
                        first_masked,
                        N_CTX,
                        SM_SCALE,
                        HEAD_DIM,
                        CAUSAL,
                        BLOCK_M,
                        BLOCK_N,
                        STAGES,
                    ),
                ),
                (
                    _ws_loader,
                    (
                        q_desc,
                        k_desc,
                        v_desc,
                        q_smem,
                        k_smem,
                        v_smem,
                        q_bar,
                        ready,
                        empty,
                        off_z,
                        off_h,
                        off_kvh,
                        start_m,
                        n_blocks,
                        BLOCK_M,
                        BLOCK_N,
                        STAGES,
                    ),
                ),
            ],
            worker_num_warps=[4, 1],
            worker_num_regs=[232, 40],
        )

    # -- the persistent warp-specialized schedule (PERSISTENT=True): one program per SM takes
    # tile after tile, heaviest first under a causal mask; its loader fetches the next tile's
    # Q and K/V while the consumers finish the last one (a tile's pipeline fill, and its
    # epilogue, overlap the neighbouring tile's work instead of idling the SM) --------------

    @gluon.jit
    def _wsp_tile(tile, H, n_m, BH, L2_HEADS, N_CTX, Blocks, CAUSAL: gl.constexpr,
                  BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, VARLEN: gl.constexpr):  # fmt: skip
        """(off_z, off_h, q0, k0, n_blocks, first_masked, row_end) of tile number `tile`: its
        first query row, its first key row, its key blocks, the first of them that needs the
        mask, and the row its output stops before. Dense: tile numbers in _tile_of's order.
        VARLEN: tile = query block * H + head, each query block a row of Blocks (its document's
        first row, length, and the block's first row in it: gluon_flash_varlen.py), causal
        within the document, whose keys start at its first row (so key columns, counted from
        there, meet the causal mask as the dense kernel's do)."""
        if VARLEN:
            block = tile // H
            k0 = gl.load(Blocks + 3 * block)
            length = gl.load(Blocks + 3 * block + 1)
            m0 = gl.load(Blocks + 3 * block + 2)
            hi = gl.minimum(m0 + BLOCK_M, length)
            result = (0, tile % H, k0 + m0, k0, gl.cdiv(hi, BLOCK_N), m0 // BLOCK_N, k0 + length)
        else:
            off_hz, start_m = _tile_of(tile, BH, n_m, L2_HEADS, CAUSAL)
            hi = N_CTX
            first_masked = N_CTX // BLOCK_N
            if CAUSAL:
                hi = gl.minimum((start_m + 1) * BLOCK_M, N_CTX)
                first_masked = gl.minimum(first_masked, start_m * BLOCK_M // BLOCK_N)
            result = (
                off_hz // H, off_hz % H, start_m * BLOCK_M, 0, gl.cdiv(hi, BLOCK_N),
                first_masked, N_CTX,
            )  # fmt: skip
        return result

    @gluon.jit
    def _wsp_loader(
        q_desc, k_desc, v_desc, q_smem, k_smem, v_smem, q_ready, q_empty, ready, empty, k_empty,
        H, KV_GROUP, N_CTX, n_m, BH, Tiles, Starts, L2_HEADS, Blocks,
        CAUSAL: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
        STAGES: gl.constexpr, Q_STAGES: gl.constexpr, SHORT_K: gl.constexpr,
        VARLEN: gl.constexpr,
    ):  # fmt: skip
        """The producer warp, over this program's tiles: a tile's two query halves into the
        next of Q_STAGES query buffers once both consumers have released the tile's Q_STAGES
        back (q_empty), and every key block's K and V into the ring, numbered across tiles, a
        slot refilled once both consumers released it. With two query buffers the loader runs a
        whole tile ahead: a tile's Q and first K/V are in flight while the consumers still work
        on the tile before it. With SHORT_K, K's ring is a slot shorter than V's, its slots
        released on their own (k_empty) once both consumers' S has read them."""
        HALF: gl.constexpr = BLOCK_M // 2
        it = 0  # key blocks issued by this program so far, over all its tiles
        t_iter = 0
        first, last = gl.load(Starts + gl.program_id(0)), gl.load(Starts + gl.program_id(0) + 1)
        for i in range(first, last):  # the host's schedule (launch.persistent_schedule)
            tile = gl.load(Tiles + i)
            off_z, off_h, q0, k0, n_blocks, first_masked, row_end = _wsp_tile(
                tile, H, n_m, BH, L2_HEADS, N_CTX, Blocks, CAUSAL, BLOCK_M, BLOCK_N, VARLEN
            )
            qb = t_iter % Q_STAGES
            if t_iter >= Q_STAGES:
                mbarrier.wait(q_empty.index(qb), ((t_iter // Q_STAGES) - 1) & 1)
            bar = q_ready.index(qb)
            mbarrier.expect(bar, 2 * q_desc.block_type.nbytes)
            for c in gl.static_range(2):  # each consumer's half
                half = _as_box(q_smem.index(2 * qb + c))
                _tma_load(q_desc, [off_z, off_h, q0 + c * HALF, 0], bar, half)
            off_kvh = off_h // KV_GROUP
            for j in range(n_blocks):
                slot = it % STAGES
                if it >= STAGES:  # the block STAGES back must be released by both consumers
                    mbarrier.wait(empty.index(slot), ((it // STAGES) - 1) & 1)
                k_slot = _k_slot(it, STAGES, SHORT_K)
                if SHORT_K:  # K's slot: the block STAGES - 1 back, once both S read it
                    if it >= STAGES - 1:
                        mbarrier.wait(k_empty.index(k_slot), ((it // (STAGES - 1)) - 1) & 1)
                _issue_kv_slot(
                    k_desc, v_desc, k_smem, v_smem, ready, off_z, off_kvh, k0 + j * BLOCK_N,
                    slot, k_slot,
                )  # fmt: skip
                it += 1
            t_iter += 1

    @gluon.jit
    def _k_slot(g, STAGES: gl.constexpr, SHORT_K: gl.constexpr):
        """The K ring's slot of the program's g-th key block: K's ring is a slot shorter than
        V's with SHORT_K, as long otherwise."""
        if SHORT_K:
            return g % (STAGES - 1)
        else:
            return g % STAGES

    @gluon.jit
    def _k_read(k_empty, g, STAGES: gl.constexpr, SHORT_K: gl.constexpr):
        """With SHORT_K: the program's g-th key block's S has read its K, whose slot the
        loader may refill once both consumers said so (V's slot waits for P V)."""
        if SHORT_K:
            mbarrier.arrive(k_empty.index(g % (STAGES - 1)))

    @gluon.jit
    def _wsp_consumer(
        c: gl.constexpr, q_smem, k_smem, v_smem, q_ready, q_empty, ready, empty, k_empty, turn,
        o_desc, H, N_CTX, n_m, BH, Tiles, Starts, L2_HEADS, Blocks, Out, stride_ot, stride_oh,
        SM_SCALE: gl.constexpr, HEAD_DIM: gl.constexpr, CAUSAL: gl.constexpr,
        BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, STAGES: gl.constexpr,
        Q_STAGES: gl.constexpr, SHORT_K: gl.constexpr, PINGPONG: gl.constexpr,
        VARLEN: gl.constexpr,
    ):  # fmt: skip
        """_ws_consumer over this program's tiles (with PINGPONG the two consumers take turns
        issuing their wgmmas, FA3's ping-pong; without, each issues once its data is ready, its
        softmax beside its own P V): the ring's blocks, the query buffers and
        the turns are numbered across tiles; a query buffer is released once the TMA store of
        the tile's O, staged in it after the last S read its Q, has read it (the loader, a
        tile ahead with two buffers, wants it for the tile after next), and a tile's last K/V
        slot once its last P V has (with SHORT_K, each block's K slot once its S has:
        _k_read)."""
        HALF: gl.constexpr = BLOCK_M // 2
        dtype: gl.constexpr = o_desc.block_type.element_ty
        s_layout: gl.constexpr = gl.NVMMADistributedLayout(
            version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, BLOCK_N, 16]
        )
        o_layout: gl.constexpr = gl.NVMMADistributedLayout(
            version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, HEAD_DIM, 16]
        )
        p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
        qk_scale = SM_SCALE * 1.4426950408889634
        zero_s = gl.zeros([HALF, BLOCK_N], gl.float32, layout=s_layout)
        offs_n = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, s_layout))
        it = 0  # key blocks consumed by this program so far, over all its tiles
        t_iter = 0
        first, last = gl.load(Starts + gl.program_id(0)), gl.load(Starts + gl.program_id(0) + 1)
        for i in range(first, last):  # the loader's tiles, in its order
            tile = gl.load(Tiles + i)
            off_z, off_h, q0, k0, n_blocks, first_masked, row_end = _wsp_tile(
                tile, H, n_m, BH, L2_HEADS, N_CTX, Blocks, CAUSAL, BLOCK_M, BLOCK_N, VARLEN
            )
            row0 = q0 + c * HALF
            offs_m = row0 + gl.arange(0, HALF, layout=gl.SliceLayout(1, s_layout))
            offs_k = k0 + offs_n  # key block j's columns are these plus j * BLOCK_N
            m_i = gl.full([HALF], float("-inf"), gl.float32, layout=gl.SliceLayout(1, s_layout))
            l_i = gl.zeros([HALF], gl.float32, layout=gl.SliceLayout(1, s_layout))
            o = gl.zeros([HALF, HEAD_DIM], gl.float32, layout=o_layout)

            qb = t_iter % Q_STAGES
            q = q_smem.index(2 * qb + c)
            mbarrier.wait(q_ready.index(qb), (t_iter // Q_STAGES) & 1)
            slot = it % STAGES
            mbarrier.wait(ready.index(slot), (it // STAGES) & 1)
            if PINGPONG:
                mbarrier.wait(turn.index(c), it & 1)
            k_0 = k_smem.index(_k_slot(it, STAGES, SHORT_K)).permute((1, 0))
            s = warpgroup_mma(q, k_0, zero_s, use_acc=False, is_async=True)
            if PINGPONG:
                mbarrier.arrive(turn.index(1 - c))
            s = warpgroup_mma_wait(0, deps=(s,))
            _k_read(k_empty, it, STAGES, SHORT_K)
            if first_masked == 0:
                s = _masked(s, 0, offs_m, offs_k, N_CTX, CAUSAL, BLOCK_N)
            p, m_i, l_i, alpha = _softmax(s, m_i, l_i, qk_scale, dtype)
            prev = slot
            for j in range(1, n_blocks):
                slot = (it + j) % STAGES
                mbarrier.wait(ready.index(slot), ((it + j) // STAGES) & 1)
                if PINGPONG:
                    mbarrier.wait(turn.index(c), (it + j) & 1)
                k_j = k_smem.index(_k_slot(it + j, STAGES, SHORT_K)).permute((1, 0))
                s = warpgroup_mma(q, k_j, zero_s, use_acc=False, is_async=True)
                p_op = gl.convert_layout(p, p_layout)
                o = warpgroup_mma(p_op, v_smem.index(prev), o, is_async=True)
                if PINGPONG:
                    mbarrier.arrive(turn.index(1 - c))
                s = warpgroup_mma_wait(1, deps=(s,))
                _k_read(k_empty, it + j, STAGES, SHORT_K)
                if j >= first_masked:
                    s = _masked(s, j, offs_m, offs_k, N_CTX, CAUSAL, BLOCK_N)
                p, m_i, l_i, alpha = _softmax(s, m_i, l_i, qk_scale, dtype)
                if not PINGPONG:
                    # A branch that ends the softmax's basic block (an arrive on the turn
                    # barriers, which nothing waits on without turns): ptxas puts the wait for
                    # P V below at the top of its block. Without it ptxas hoists that wait above
                    # the softmax, which then runs after this warpgroup's own P V rather than
                    # beside it (dev/gluon_ptxas.py --order)
                    if j == n_blocks - 1:
                        mbarrier.arrive(turn.index(c))
                o, p_op = warpgroup_mma_wait(0, deps=(o, p_op))
                mbarrier.arrive(empty.index(prev))  # block j-1's K and V: done
                o = o * gl.convert_layout(alpha, gl.SliceLayout(1, o_layout))[:, None]
                prev = slot

            p_op = gl.convert_layout(p, p_layout)
            o = warpgroup_mma(p_op, v_smem.index(prev), o, is_async=True)
            o, p_op = warpgroup_mma_wait(0, deps=(o, p_op))
            mbarrier.arrive(empty.index(prev))  # the tile's last block: the next tile's slot
            it += n_blocks
            t_iter += 1

            if VARLEN:
                if row0 + HALF > row_end:  # the document ends in these rows
                    _store_o_rows(
                        o, l_i, Out, stride_ot, stride_oh, off_h, row0, row_end, HALF,
                        HEAD_DIM, o_layout,
                    )  # fmt: skip
                else:
                    _store_o(o, l_i, o_desc, q, off_z, off_h, row0, o_layout)
            else:
                _store_o(o, l_i, o_desc, q, off_z, off_h, row0, o_layout)
            # the query buffer held the tile's Q, then its O on the way out: both done
            mbarrier.arrive(q_empty.index(qb))

    @gluon.jit
    def _gluon_attn_fwd_wsp(
        q_desc, k_desc, v_desc, o_desc,
        H, KV_GROUP, N_CTX, L2_HEADS, Z, Tiles, Starts, Blocks, Out, stride_ot, stride_oh,
        SM_SCALE: gl.constexpr,
        HEAD_DIM: gl.constexpr,
        CAUSAL: gl.constexpr,
        BLOCK_M: gl.constexpr,
        BLOCK_N: gl.constexpr,
        STAGES: gl.constexpr,
        Q_STAGES: gl.constexpr,
        SHORT_K: gl.constexpr,
        PINGPONG: gl.constexpr,
        VARLEN: gl.constexpr,
        num_warps: gl.constexpr,
    ):  # fmt: skip
        gl.static_assert(num_warps == 4, "the default partition is one consumer warpgroup")
        gl.static_assert(STAGES >= 2, "each consumer holds blocks j-1 and j")
        gl.static_assert(not SHORT_K or STAGES >= 3, "a short K ring needs two slots")
        dtype: gl.constexpr = o_desc.block_type.element_ty
        HALF: gl.constexpr = BLOCK_M // 2
        tile_layout: gl.constexpr = gl.NVMMASharedLayout(
            swizzle_byte_width=128, element_bitwidth=16
        )
        n_m = gl.cdiv(N_CTX, BLOCK_M)
        BH = Z * H
        # Q_STAGES query tiles, each as its two consumers' halves
        q_smem = gl.allocate_shared_memory(dtype, [2 * Q_STAGES, HALF, HEAD_DIM], tile_layout)
        # K's ring a slot shorter than V's with SHORT_K (block j's K is done with once both
        # consumers' S_j are, its V a step later): the shared memory D = 128 needs for two
        # query buffers beside three V slots (224 KiB of the 227 a program may have)
        if SHORT_K:
            k_smem = gl.allocate_shared_memory(dtype, [STAGES - 1, BLOCK_N, HEAD_DIM], tile_layout)
        else:
            k_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, HEAD_DIM], tile_layout)
        v_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, HEAD_DIM], tile_layout)
        q_ready = gl.allocate_shared_memory(gl.int64, [Q_STAGES, 1], mbarrier.MBarrierLayout())
        q_empty = gl.allocate_shared_memory(gl.int64, [Q_STAGES, 1], mbarrier.MBarrierLayout())
        ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
        empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
        turn = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
        for i in gl.static_range(Q_STAGES):
            mbarrier.init(q_ready.index(i), count=1)
            mbarrier.init(q_empty.index(i), count=2)  # one release per consumer
        for i in gl.static_range(STAGES):
            mbarrier.init(ready.index(i), count=1)
            mbarrier.init(empty.index(i), count=2)
        if SHORT_K:  # K's slots released apart from V's
            k_empty = gl.allocate_shared_memory(
                gl.int64, [STAGES - 1, 1], mbarrier.MBarrierLayout()
            )
            for i in gl.static_range(STAGES - 1):
                mbarrier.init(k_empty.index(i), count=2)
        else:  # never waited on nor arrived at
            k_empty = empty
        mbarrier.init(turn.index(0), count=1)
        mbarrier.init(turn.index(1), count=1)
        mbarrier.arrive(turn.index(0))  # consumer 0 has the first turn

        gl.warp_specialize(
            [
                (
                    _wsp_consumer,
                    (
                        0,
                        q_smem,
                        k_smem,
                        v_smem,
                        q_ready,
                        q_empty,
                        ready,
                        empty,
                        k_empty,
                        turn,
                        o_desc,
                        H,
                        N_CTX,
                        n_m,
                        BH,
                        Tiles,
                        Starts,
                        L2_HEADS,
                        Blocks,
                        Out,
                        stride_ot,
                        stride_oh,
                        SM_SCALE,
                        HEAD_DIM,
                        CAUSAL,
                        BLOCK_M,
                        BLOCK_N,
                        STAGES,
                        Q_STAGES,
                        SHORT_K,
                        PINGPONG,
                        VARLEN,
                    ),  # fmt: skip
                ),
                (
                    _wsp_consumer,
                    (
                        1,
                        q_smem,
                        k_smem,
                        v_smem,
                        q_ready,
                        q_empty,
                        ready,
                        empty,
                        k_empty,
                        turn,
                        o_desc,
                        H,
                        N_CTX,
                        n_m,
                        BH,
                        Tiles,
                        Starts,
                        L2_HEADS,
                        Blocks,
                        Out,
                        stride_ot,
                        stride_oh,
                        SM_SCALE,
                        HEAD_DIM,
                        CAUSAL,
                        BLOCK_M,
                        BLOCK_N,
                        STAGES,
                        Q_STAGES,
                        SHORT_K,
                        PINGPONG,
                        VARLEN,
                    ),  # fmt: skip
                ),
                (
                    _wsp_loader,
                    (
                        q_desc,
                        k_desc,
                        v_desc,
                        q_smem,
                        k_smem,
                        v_smem,
                        q_ready,
                        q_empty,
                        ready,
                        empty,
                        k_empty,
                        H,
                        KV_GROUP,
                        N_CTX,
                        n_m,
                        BH,
                        Tiles,
                        Starts,
                        L2_HEADS,
                        Blocks,
                        CAUSAL,
                        BLOCK_M,
                        BLOCK_N,
                        STAGES,
                        Q_STAGES,
                        SHORT_K,
                        VARLEN,
                    ),  # fmt: skip
                ),
            ],
            worker_num_warps=[4, 1],
            worker_num_regs=[232, 40],
        )


# The warp-specialized schedule, one program per tile (correct and timed on the H200):
# 4 warps here are consumer 0 (the default partition); consumer 1 and the loader warp are added.
# Each tile set names both schedule flags (SCHEDULE_FLAGS): overrides merge into tiles(D, S), whose
# flags would otherwise stay on.
WS_TILES = {
    "BLOCK_M": 128, "BLOCK_N": 128, "STAGES": 3, "num_warps": 4, "WS": True, "PERSISTENT": False,
}  # fmt: skip
# D = 128 on one warpgroup per 64 rows, no producer warp: the default before WS_TILES was timed
SINGLE_TILES_D128 = {
    "BLOCK_M": 128, "BLOCK_N": 128, "STAGES": 3, "num_warps": 8, "WS": False, "PERSISTENT": False,
}  # fmt: skip
# The warp-specialized schedule on a persistent grid, its tiles dealt by the host
# (launch.persistent_schedule), D = 128's default: on the H200 it took 0.5281 ms at
# 2x32x4096x128 against 0.5573 for WS_TILES, 0.3431 against 0.3662 at 3x24x3072x128 and
# 0.2573 against 0.2777 at 1x32x4096x128 GQA 32/8, and tied at 1x32x8192x128
# (dev/results/h200/gluon_flash/bench_persistent_dealt_*)
PERSISTENT_TILES = {
    **WS_TILES, "PERSISTENT": True, "Q_STAGES": 1, "SHORT_K": False, "PINGPONG": True,
}  # fmt: skip
# D = 128's default: PERSISTENT_TILES with K's ring a slot shorter than V's, which makes room
# for a second query buffer (224 KiB in all, as before), so the loader runs a tile ahead: on
# the H200 0.5108 ms against 0.5243 at 2x32x4096x128, 0.3308 / 0.3450 at 3x24x3072x128,
# 0.9571 / 0.9626 at 1x32x8192x128, 0.0936 / 0.0955 at 8x16x1024x128, 0.0732 / 0.0742 at
# 16x16x512x128, level at 4x16x512x128 (short K with one query buffer: in between;
# dev/results/h200/gluon_flash/bench_short_k_2026-12-04.txt). Triton 3.9's ptxas spills 100
# bytes in it against 24; the H200's Triton 3.6 48 against 48, all at a tile's edge, none in
# a consumer's key-block loop (dev/gluon_ptxas.py --where,
# dev/results/cpu/gluon_spill_sites_2026-12-05.txt).
PERSISTENT_TILES_D128 = {**PERSISTENT_TILES, "Q_STAGES": 2, "SHORT_K": True}
# D = 128's default with its consumers issuing their wgmmas freely (PINGPONG False), each running
# block j's softmax beside its own P_{j-1} V_{j-1}, instead of taking turns on the tensor cores
# with the softmax after its own P V (where ptxas puts it: the wait for P V hoisted above the
# softmax; dev/gluon_ptxas.py --order). Opt-in: faster on some H100s, slower on the H200 at
# three of four D = 128 shapes, and under a long loop both schedules hold the GPU at its power
# limit, where the clock may give back what the overlap saves (docs/variants.md, "Schedule" and
# "Power"; the figures in dev/results/h100/gluon_flash/README.md and
# dev/results/h200/gluon_flash/README.md).
FREE_ISSUE_TILES_D128 = {**PERSISTENT_TILES_D128, "PINGPONG": False}


# D = 64 runs the persistent grid from this S on: on the H200 it took 0.1762 ms against 0.1956
# for 64-row tiles at 2x8x6000x64, 1.2778 against 1.4181 at 4x16x8192x64 and 4.993 against
# 5.547 at 4x16x16384x64, tied at 4x16x2048x64 (0.1013, 0.1019) and lost at 8x16x1024x64
# (0.0680 against 0.0655): dev/results/h200/gluon_flash/bench_d64_persistent_2026-12-04.txt
PERSISTENT_FROM_SEQ_D64 = 2048
# D = 64's persistent tiles: two query buffers, so the loader fetches a tile's Q and first K/V
# while the consumers still work on the one before (the smem D = 128 lacks for them), and a
# fourth K/V slot: 1.2892 ms against 1.3137 for PERSISTENT_TILES at 4x16x8192x64, 0.1730
# against 0.1763 at 2x8x6000x64 (dev/results/h200/gluon_flash/bench_q_stages_2026-12-04.txt)
PERSISTENT_TILES_D64 = {**PERSISTENT_TILES, "STAGES": 4, "Q_STAGES": 2}


def tiles(head_dim: int, seq: int = 0) -> dict:
    """Tile sizes per (head dim, S) bucket, the fastest of those timed on the H200: D = 64
    below PERSISTENT_FROM_SEQ_D64, 64 query rows on one warpgroup (more programs per SM;
    warp-specialized 128-row tiles took 0.082 ms at 8x16x1024x64 against 0.069); D = 128, and
    D = 64 from PERSISTENT_FROM_SEQ_D64 on, the warp-specialized schedule on 128x128 tiles
    (1.100 ms at 1x32x8192x128 against 1.264 for the best single-warpgroup tile, 1.352 with 2
    stages) on a persistent grid whose tiles the host deals (PERSISTENT_TILES: 4-8% faster at
    S = 3072-4096 and D = 128, 10-11% at S = 6000-16384 and D = 64), with two query buffers
    (at D = 128 beside a K ring a slot shorter than V's: PERSISTENT_TILES_D128)."""
    if head_dim == 64 and seq < PERSISTENT_FROM_SEQ_D64:
        return {"BLOCK_M": 64, "BLOCK_N": 64, "STAGES": 3, "num_warps": 4, "WS": False,
                "PERSISTENT": False}  # fmt: skip
    return dict(PERSISTENT_TILES_D64 if head_dim == 64 else PERSISTENT_TILES_D128)


def check_inputs(q, k, v, name: str = "gluon-flash") -> None:
    """Refuse what the kernel does not compute, with the reason (never a wrong answer); `name`:
    the variant the reasons name."""
    if gl is None:
        raise Unsupported(f"{name} needs Triton with Gluon (Triton 3.6+): {_NO_GLUON}")
    if q.device.type != "cuda":
        raise Unsupported(f"{name} needs a Hopper GPU (sm90): it has no CPU or interpreter path")
    major = torch.cuda.get_device_capability(q.device)[0]
    if major != 9:
        raise Unsupported(
            f"{name} runs on Hopper (sm90) only: its wgmma instructions are sm90's; "
            f"this GPU is sm{major}x"
        )
    check_shapes(name, q, k, v)
    if q.shape[-1] not in (64, 128):
        raise Unsupported(f"{name} supports head dims 64 and 128, not {q.shape[-1]}")
    if q.dtype not in (torch.bfloat16, torch.float16) or not q.dtype == k.dtype == v.dtype:
        raise Unsupported(
            f"{name} computes bfloat16 or float16 inputs of one dtype, not {q.dtype}, "
            f"{k.dtype}, {v.dtype}"
        )
    for arg, t in (("q", q), ("k", k), ("v", v)):
        # TMA reads rows of D contiguous elements, each row start 16-byte aligned
        if t.stride(-1) != 1 or any((s * t.element_size()) % 16 for s in t.stride()[:-1]):
            raise Unsupported(
                f"{name} reads {arg} through TMA: its last dim must be contiguous and its "
                f"other strides 16-byte multiples (got strides {t.stride()}); pass .contiguous()"
            )
        if (t.storage_offset() * t.element_size()) % 16:  # (torch allocates 256-byte aligned)
            raise Unsupported(
                f"{name} reads {arg} through TMA: it must start 16-byte aligned in its "
                f"storage (offset {t.storage_offset()} elements); pass .contiguous()"
            )


_BOX_LAYOUT = []  # the descriptors' shared-memory layout, built once (Gluon imported lazily)


def _descriptor(t, rows: int):
    """A host-side TMA descriptor over t [B, H, S, D] whose box is [1, 1, rows, D]: rows past one
    head's S read as zeros, never the next head's."""
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

    if not _BOX_LAYOUT:
        _BOX_LAYOUT.append(
            gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=16, rank=4)
        )
    return TensorDescriptor.from_tensor(t, [1, 1, rows, t.shape[-1]], _BOX_LAYOUT[0])


# launch key -> (its launcher, called with (q, k, v), out and the arguments after out:
# launch.descriptor_launcher, which keeps the descriptors' CUtensorMaps per address; those
# arguments after out): a known key's later calls skip Triton's JIT dispatch
# (binding, specializing four descriptors, the cache key), which cost about 0.1 ms of host per
# call on the H200, more than the kernel at small shapes. As variants/triton_flash.py does.
_FAST_LAUNCH = LaunchCache()


def _rebased(template, t):
    """`template`, a descriptor the key's first call built and checked (TensorDescriptor's
    __post_init__), over `t`: the key fixes t's shape, strides, dtype and alignment, so the
    checks would pass again, and they are most of the host time building one anew takes (the
    fast path's host time is what a small shape waits on). `t` None: a template that holds no
    caller's tensor."""
    if not hasattr(template, "__dict__"):  # a Triton whose descriptor has slots
        return _descriptor(t, template.block_shape[2]) if t is not None else template
    desc = object.__new__(type(template))
    desc.__dict__.update(template.__dict__)
    desc.base = t
    return desc


def launch_key(q, k, v, causal: bool, overrides: dict) -> tuple:
    """Everything the compiled kernel is specialized on for these inputs (the output's strides
    follow from q's shape and strides), and everything check_inputs reads: a known key skips it."""
    return (*tensor_key(q, k, v), causal, tuple(sorted(overrides.items())))


def _launch_known(q, k, v, causal: bool, overrides: dict):
    """The fast path: the output, with the key's compiled kernel launched straight on q's, k's,
    v's and the output's descriptors (their CUtensorMaps kept per address:
    launch.descriptor_launcher); None where the key has none yet."""
    known = _FAST_LAUNCH.get(launch_key(q, k, v, causal, overrides))
    if known is None:
        return None
    run, tail = known
    out = torch.empty_like(q)
    run((q, k, v, out), *tail)
    return out


# the tile settings that pick a schedule (schedule_of), not constexprs of its kernel
SCHEDULE_FLAGS = ("WS", "PERSISTENT")


def schedule_of(cfg: dict) -> tuple:
    """(the kernel that runs tile settings `cfg`, the rows of Q's descriptor box, whether it is
    the persistent grid): the warp-specialized kernels, persistent too, load Q in two halves.
    (The one-warpgroup kernel on a persistent grid, four programs an SM, lost to its
    one-tile-a-program grid at every shape timed: dev/results/h200/gluon_flash/README.md.)"""
    persistent = cfg.get("PERSISTENT", False)  # warp-specialized too
    ws = cfg.get("WS", False) or persistent
    kernel = _gluon_attn_fwd_wsp if persistent else _gluon_attn_fwd_ws if ws else _gluon_attn_fwd
    return kernel, cfg["BLOCK_M"] // (2 if ws else 1), persistent


def _launch(q, k, v, causal: bool, **overrides) -> torch.Tensor:
    batch, heads, seq, dim = q.shape
    out = torch.empty_like(q)
    cfg = {**tiles(dim, seq), **overrides}
    grid = (batch * heads, triton.cdiv(seq, cfg["BLOCK_M"]))
    kernel, q_rows, persistent = schedule_of(cfg)
    kv_rows = cfg["BLOCK_N"]
    group = heads // k.shape[1]
    # L2_HEADS among the overrides: another grouping of the tiles, for tuning experiments
    l2_heads = cfg.get("L2_HEADS") or l2_group_heads(k.shape[2], dim, k.element_size(), group)
    tail = (heads, group, seq, l2_heads)
    if persistent:  # one program per SM, taking tile after tile
        grid = (min(grid[0] * grid[1], _sm_count(q.device)), 1)
        schedule = tuple(_schedule(q.device, grid[0], seq, cfg, l2_heads, causal, batch * heads))
        # then varlen's Blocks, Out and Out's strides, which a dense launch never reads
        tail += (batch, *schedule, schedule[0], schedule[0], 0, 0)
    consts = dict(
        SM_SCALE=1.0 / math.sqrt(dim), HEAD_DIM=dim, CAUSAL=causal,
        BLOCK_M=cfg["BLOCK_M"], BLOCK_N=cfg["BLOCK_N"], STAGES=cfg["STAGES"],
        num_warps=cfg["num_warps"],
    )  # fmt: skip
    if persistent:
        consts["Q_STAGES"] = cfg.get("Q_STAGES", 1)
        consts["SHORT_K"] = cfg.get("SHORT_K", False)
        consts["PINGPONG"] = cfg.get("PINGPONG", True)
        consts["VARLEN"] = False
    # O leaves through a descriptor like Q's (its rows' query buffer stages it: _store_o)
    descs = (
        _descriptor(q, q_rows), _descriptor(k, kv_rows), _descriptor(v, kv_rows),
        _descriptor(out, q_rows),
    )  # fmt: skip
    compiled = kernel[grid](*descs, *tail, **consts)
    if hasattr(compiled, "run") and hasattr(compiled, "__getitem__"):
        # the launcher wants every argument of the signature in order, constexprs included
        names = kernel.arg_names
        _FAST_LAUNCH.remember(
            launch_key(q, k, v, causal, overrides),
            (
                descriptor_launcher(
                    compiled, (*grid, 1), tuple(_rebased(d, None) for d in descs), _rebased
                ),
                tail + tuple(consts[n] for n in names[len(descs) + len(tail) :]),
            ),
        )  # fmt: skip
    return out


_SM_COUNT: dict = {}


def _schedule(device, programs: int, seq: int, cfg: dict, l2_heads: int, causal: bool, bh: int):
    """The persistent grid's (Tiles, Starts) on the device: which tiles each program runs
    (variants.launch.persistent_schedule). Made on a launch key's first call only: the fast
    path keeps them with the key."""
    tiles, starts = persistent_schedule(
        bh, seq, cfg["BLOCK_M"], cfg["BLOCK_N"], l2_heads, causal, programs
    )
    return (torch.tensor(t, dtype=torch.int32, device=device) for t in (tiles, starts))


def _sm_count(device) -> int:
    """The device's streaming multiprocessors (a persistent grid's size), asked once."""
    index = device.index if device.index is not None else torch.cuda.current_device()
    if index not in _SM_COUNT:
        _SM_COUNT[index] = torch.cuda.get_device_properties(index).multi_processor_count
    return _SM_COUNT[index]


# The op torch.compile calls (Inductor cannot see into a Gluon kernel). Defined on a Library
# with a plain CompositeExplicitAutograd kernel, not torch.library.custom_op: custom_op's
# autograd wrapper and its per-call aliasing check cost about 23 us of host per call against 4
# for this (experiments/results/cpu/op_dispatch/), and gluon-flash's compiled call is host-bound
# at 8x16x1024x64 (0.135 ms of host per call on the H200). Inputs that require grad raise on
# backward.
OP_NAMESPACE = "compilekit"
_LIB = torch.library.Library(OP_NAMESPACE, "FRAGMENT")  # kept: the op lives as long as it does
_LIB.define("gluon_flash_attention(Tensor q, Tensor k, Tensor v, bool causal) -> Tensor")


def _gluon_kernel(q, k, v, causal):
    out = _launch_known(q, k, v, causal, {})
    return out if out is not None else _launch(q, k, v, causal)


_LIB.impl("gluon_flash_attention", _gluon_kernel, "CompositeExplicitAutograd")


@torch.library.register_fake(f"{OP_NAMESPACE}::gluon_flash_attention", lib=_LIB)
def _(q, k, v, causal):
    return torch.empty_like(q)


_gluon_op = getattr(torch.ops, OP_NAMESPACE).gluon_flash_attention.default


def flash_attention(q, k, v, causal: bool = True, **overrides):
    """softmax(q kT / sqrt(D) + mask) v for q [B, H, S, D], k/v [B, H_kv, S, D] on a Hopper GPU.
    `overrides` (BLOCK_N, STAGES, ...) replace tiles(D, S)'s, for tuning experiments (eager
    only)."""
    if torch.compiler.is_compiling():
        return _gluon_op(q, k, v, causal)
    out = _launch_known(q, k, v, causal, overrides)
    if out is not None:
        return out
    check_inputs(q, k, v)
    return _launch(q, k, v, causal, **overrides)


def attention(q, k, v):
    return flash_attention(q, k, v, causal=True)


if __name__ == "__main__":  # this variant alone: its time and error at the default shape
    from compilekit.variants.standalone import main

    raise SystemExit(main(__file__, attention, globals().get("reference")))
