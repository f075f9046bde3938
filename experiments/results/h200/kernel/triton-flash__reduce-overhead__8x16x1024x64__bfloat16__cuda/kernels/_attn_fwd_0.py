
import triton
import triton.language as tl

from torch._inductor.runtime import triton_helpers, triton_heuristics
from torch._inductor.runtime.triton_helpers import libdevice, math as tl_math
from torch._inductor.runtime.hints import AutotuneHint, ReductionHint, TileHint, DeviceProperties

@triton_heuristics.user_autotune(
    configs=[{'BLOCK_M': 64, 'BLOCK_N': 64, 'TMA': False, 'num_warps': 4, 'num_stages': 3}],
    inductor_meta={'grid_type': 'FixedGrid', 'fixed_grid': ['_grid_0', '_grid_1', '_grid_2'], 'extra_launcher_args': ['_grid_0', '_grid_1', '_grid_2'], 'kernel_name': '_attn_fwd_0', 'backend_hash': '91D1D1166449D9E2EB66EB9770C9E2C3B0FEB787341F27FEB4D3F0338DA50336', 'assert_indirect_indexing': True, 'autotune_local_cache': True, 'autotune_pointwise': True, 'autotune_remote_cache': None, 'force_disable_caches': False, 'dynamic_scale_rblock': True, 'max_autotune': False, 'max_autotune_pointwise': False, 'min_split_scan_rblock': 256, 'spill_threshold': 16, 'store_cubin': False, 'deterministic': False, 'force_filter_reduction_configs': False, 'mix_order_reduction_allow_multi_stages': False, 'are_deterministic_algorithms_enabled': False},
    triton_meta={'signature': {'Q': '*bf16', 'K': '*bf16', 'V': '*bf16', 'Out': '*bf16', 'stride_qz': 'i32', 'stride_qh': 'i32', 'stride_qm': 'i32', 'stride_qk': 'constexpr', 'stride_kz': 'i32', 'stride_kh': 'i32', 'stride_kn': 'i32', 'stride_kk': 'constexpr', 'stride_vz': 'i32', 'stride_vh': 'i32', 'stride_vn': 'i32', 'stride_vk': 'constexpr', 'stride_oz': 'i32', 'stride_oh': 'i32', 'stride_om': 'i32', 'stride_ok': 'constexpr', 'H': 'i32', 'KV_GROUP': 'constexpr', 'N_CTX': 'i32', 'S_BUCKET': 'i32', 'HEAD_DIM': 'constexpr', 'SM_SCALE': 'constexpr', 'CAUSAL': 'constexpr', 'WINDOW': 'constexpr', 'TMA_OK': 'constexpr', 'BLOCK_M': 'constexpr', 'BLOCK_N': 'constexpr', 'TMA': 'constexpr'}, 'device': DeviceProperties(type='cuda', index=0, multi_processor_count=132, cc=90, major=9, regs_per_multiprocessor=65536, max_threads_per_multi_processor=2048, max_threads_per_block=1024, warp_size=32), 'constants': {'stride_qk': 1, 'stride_kk': 1, 'stride_vk': 1, 'stride_ok': 1, 'KV_GROUP': 1, 'HEAD_DIM': 64, 'SM_SCALE': 0.125, 'CAUSAL': True, 'WINDOW': 0, 'TMA_OK': True}, 'configs': [{(0,): [['tt.divisibility', 16]], (1,): [['tt.divisibility', 16]], (2,): [['tt.divisibility', 16]], (3,): [['tt.divisibility', 16]], (4,): [['tt.divisibility', 16]], (5,): [['tt.divisibility', 16]], (6,): [['tt.divisibility', 16]], (8,): [['tt.divisibility', 16]], (9,): [['tt.divisibility', 16]], (10,): [['tt.divisibility', 16]], (12,): [['tt.divisibility', 16]], (13,): [['tt.divisibility', 16]], (14,): [['tt.divisibility', 16]], (16,): [['tt.divisibility', 16]], (17,): [['tt.divisibility', 16]], (18,): [['tt.divisibility', 16]], (20,): [['tt.divisibility', 16]], (22,): [['tt.divisibility', 16]], (23,): [['tt.divisibility', 16]]}]},
    filename=__file__,
    custom_kernel=True,
)
@triton.jit
def _attn_fwd(
    Q,
    K,
    V,
    Out,
    stride_qz,
    stride_qh,
    stride_qm,
    stride_qk,
    stride_kz,
    stride_kh,
    stride_kn,
    stride_kk,
    stride_vz,
    stride_vh,
    stride_vn,
    stride_vk,
    stride_oz,
    stride_oh,
    stride_om,
    stride_ok,
    H,
    KV_GROUP,
    N_CTX,
    S_BUCKET,  # N_CTX rounded up to a power of two: the autotuner keys on it, not on N_CTX
    HEAD_DIM: tl.constexpr,
    # constexpr: Inductor passes Python float kernel arguments as fp64 (eager Triton as
    # fp32), which would make the loop-carried m_i change type under torch.compile
    SM_SCALE: tl.constexpr,
    CAUSAL: tl.constexpr,
    WINDOW: tl.constexpr,
    TMA_OK: tl.constexpr,  # tma_ok(q, k, v): whether the TMA configs may run at all
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    TMA: tl.constexpr,  # the config's: K and V through tensor descriptors
):
    # Grid (B*H, query blocks): heads vary fastest in launch order, and under a causal mask
    # the query blocks run last-first, so the heaviest tiles (most keys) start first and
    # the light ones fill the tail (longest-processing-time order).
    off_hz = tl.program_id(0)
    start_m = tl.program_id(1)
    if CAUSAL:
        start_m = tl.num_programs(1) - 1 - start_m
    off_z = off_hz // H
    off_h = off_hz % H
    off_kvh = off_h // KV_GROUP  # GQA: KV_GROUP query heads share one K/V head

    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    q_ptrs = (
        Q
        + off_z.to(tl.int64) * stride_qz
        + off_h.to(tl.int64) * stride_qh
        + offs_m[:, None] * stride_qm
        + offs_d[None, :] * stride_qk
    )
    k_base = K + off_z.to(tl.int64) * stride_kz + off_kvh.to(tl.int64) * stride_kh
    v_base = V + off_z.to(tl.int64) * stride_vz + off_kvh.to(tl.int64) * stride_vh
    if TMA:  # this head's rows, built on the device (no host descriptors to autotune)
        k_base = tl.make_tensor_descriptor(
            k_base, [N_CTX, HEAD_DIM], [stride_kn, 1], [BLOCK_N, HEAD_DIM]
        )
        v_base = tl.make_tensor_descriptor(
            v_base, [N_CTX, HEAD_DIM], [stride_vn, 1], [BLOCK_N, HEAD_DIM]
        )

    # -- load the query tile once; rows past the end are zeros and never stored --
    q = tl.load(q_ptrs, mask=offs_m[:, None] < N_CTX, other=0.0)
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    qk_scale = SM_SCALE * 1.44269504  # exp(x) = exp2(x * log2(e))

    # -- the key blocks this query tile can see, in two loops: the blocks every row of the
    # tile sees whole (no mask), then the diagonal or tail blocks (masked) --
    if WINDOW > 0:  # the window's edge crosses most blocks it touches: one masked loop
        lo = tl.maximum(start_m * BLOCK_M - WINDOW + 1, 0) // BLOCK_N * BLOCK_N
        full_hi = lo
    elif CAUSAL:
        lo = 0
        full_hi = start_m * BLOCK_M // BLOCK_N * BLOCK_N  # keys left of the tile's first row
    else:
        lo = 0
        full_hi = N_CTX // BLOCK_N * BLOCK_N
    hi = N_CTX
    if CAUSAL:
        hi = tl.minimum((start_m + 1) * BLOCK_M, N_CTX)
    acc, l_i, m_i = _attn_blocks(
        acc,
        l_i,
        m_i,
        q,
        k_base,
        v_base,
        stride_kn,
        stride_kk,
        stride_vn,
        stride_vk,
        offs_m,
        offs_n,
        offs_d,
        lo,
        full_hi,
        N_CTX,
        qk_scale,
        False,
        CAUSAL,
        WINDOW,
        BLOCK_N,
        TMA,
    )
    acc, l_i, m_i = _attn_blocks(
        acc,
        l_i,
        m_i,
        q,
        k_base,
        v_base,
        stride_kn,
        stride_kk,
        stride_vn,
        stride_vk,
        offs_m,
        offs_n,
        offs_d,
        full_hi,
        hi,
        N_CTX,
        qk_scale,
        True,
        CAUSAL,
        WINDOW,
        BLOCK_N,
        TMA,
    )

    # -- normalise and store the rows that exist --
    acc = acc / tl.where(l_i == 0.0, 1.0, l_i)[:, None]
    o_ptrs = (
        Out
        + off_z.to(tl.int64) * stride_oz
        + off_h.to(tl.int64) * stride_oh
        + offs_m[:, None] * stride_om
        + offs_d[None, :] * stride_ok
    )
    tl.store(o_ptrs, acc.to(Out.dtype.element_ty), mask=offs_m[:, None] < N_CTX)

@triton.jit
def _attn_blocks(
    acc,
    l_i,
    m_i,
    q,
    k_base,
    v_base,
    stride_kn,
    stride_kk,
    stride_vn,
    stride_vk,
    offs_m,
    offs_n,
    offs_d,
    lo,
    hi,
    N_CTX,
    qk_scale,
    MASKED: tl.constexpr,
    CAUSAL: tl.constexpr,
    WINDOW: tl.constexpr,
    BLOCK_N: tl.constexpr,
    TMA: tl.constexpr,
):
    """Key blocks [lo, hi) folded into the running softmax state (acc, l_i, m_i).

    MASKED=False is the hot loop: every key there is in range and visible to every query
    row of the tile, so it skips the bounds loads, the compare, the select and the guard
    for fully masked rows (softmax ALU work is what Hopper runs out of first).
    TMA: k_base and v_base are tensor descriptors of this head's [N_CTX, HEAD_DIM] rows;
    the copy engine fills rows past N_CTX with zeros, so no load needs a mask.
    """
    for start_n in range(lo, hi, BLOCK_N):
        cols = start_n + offs_n
        if TMA:
            k = k_base.load([start_n, 0]).T
        else:
            k_ptrs = k_base + cols[None, :] * stride_kn + offs_d[:, None] * stride_kk
            v_ptrs = v_base + cols[:, None] * stride_vn + offs_d[None, :] * stride_vk
        if MASKED:
            if not TMA:
                k = tl.load(k_ptrs, mask=cols[None, :] < N_CTX, other=0.0)
            keep = cols[None, :] < N_CTX
            if CAUSAL:
                keep = keep & (offs_m[:, None] >= cols[None, :])
            if WINDOW > 0:
                keep = keep & (offs_m[:, None] - cols[None, :] < WINDOW)
            qk = tl.where(keep, tl.dot(q, k), float("-inf"))
            m_new = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
            m_exp = tl.where(m_new == float("-inf"), 0.0, m_new)  # fully masked rows stay 0
        else:
            if not TMA:
                k = tl.load(k_ptrs)
            qk = tl.dot(q, k)
            m_new = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
            m_exp = m_new  # every row saw a key: the max is finite
        # -- online softmax: rescale what came before to the new running max. The scale is
        # applied after the row max (it is positive, so the max is the same key), and then
        # with the subtraction as one fused multiply-add per score, not a multiply and a
        # subtract: the softmax's ALU work is what Hopper runs out of first --
        p = tl.math.exp2(qk * qk_scale - m_exp[:, None])
        alpha = tl.math.exp2(m_i - m_exp)
        l_i = l_i * alpha + tl.sum(p, 1)
        if TMA:
            v = v_base.load([start_n, 0])
        elif MASKED:
            v = tl.load(v_ptrs, mask=cols[:, None] < N_CTX, other=0.0)
        else:
            v = tl.load(v_ptrs)
        # the rescaled accumulator goes into the MMA as its addend (wgmma accumulates)
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
        m_i = m_new
    return acc, l_i, m_i
