"""triton-flash over a ragged batch: packed q [T, H, D] and k, v [T, H_kv, D] with cumulative
sequence offsets, causal within each document, GQA (K/V heads dividing the heads).

The setup lays the query blocks of every document end to end in a table (the document's first
row and length, the block's first row in it), the blocks that see the most keys first so the
longest programs start first; one program computes one query block of one head against the keys
of its own document up to the block's last row, with triton_flash.py's loop (online softmax,
unmasked blocks apart from the diagonal). No row of padding is computed, and no block crosses a
document. Varlen shape (compilekit/model/varlen.py).
"""

import math

import torch

from compilekit.variants.launch import INTERPRET, outside_compile
from compilekit.variants.triton_flash import (
    check_head,
    check_runtime,
    ensure_allocator,
    tma_ok,
    tma_where_ok,
)
from compilekit.variants.varlen import query_blocks
from compilekit.variants.varlen import workload as varlen_workload

try:
    import triton
    import triton.language as tl
except ImportError:  # CPU builds of torch come without triton
    triton = None

DESCRIPTION = "hand-written Triton flash attention over packed documents (offsets, causal, GQA)"
OP_NAME = "compilekit::flash_varlen"
# query rows per program, fixed when the block table is built: 128-row tiles keep Hopper's
# wgmma units fed (as triton-flash's own configs); 64 on the interpreter, so that the tests'
# short documents still span several blocks
BLOCK_M = 64 if INTERPRET else 128


def _configs():
    if INTERPRET:  # every config would be interpreted in numpy: one
        return [triton.Config({"BLOCK_N": 64, "TMA": False}, num_warps=1, num_stages=1)]
    plain = [(64, 8, 3), (64, 4, 3), (128, 8, 3), (32, 4, 4), (64, 8, 2)]
    # K and V through tensor descriptors (sm90+), as triton-flash's TMA configs: the copy
    # engine moves the tiles and fills the rows past the document with zeros; the autotuner
    # keeps whichever is faster
    tma = [(64, 8, 3), (64, 4, 3), (128, 8, 2)]
    return [
        triton.Config({"BLOCK_N": n, "TMA": t}, num_warps=w, num_stages=st)
        for (n, w, st), t in [(c, False) for c in plain] + [(c, True) for c in tma]
    ]


if triton is not None:
    from compilekit.variants.triton_flash import _attn_blocks

    @triton.autotune(
        configs=_configs(),
        key=["HEAD_DIM", "GROUP", "BLOCK_M", "TMA_OK"],
        prune_configs_by={"early_config_prune": tma_where_ok},
    )
    @triton.jit
    def _varlen_fwd(
        Q, K, V, Out, DocStart, DocLen, BlockStart,
        stride_qt, stride_qh, stride_kt, stride_kh, stride_vt, stride_vh, stride_ot, stride_oh,
        GROUP,
        SM_SCALE: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr,
        TMA_OK: tl.constexpr, BLOCK_N: tl.constexpr, TMA: tl.constexpr,
    ):  # fmt: skip
        block = tl.program_id(0)
        head = tl.program_id(1)
        kv_head = head // GROUP
        doc_start = tl.load(DocStart + block)
        doc_len = tl.load(DocLen + block)
        m_start = tl.load(BlockStart + block)
        offs_m = m_start + tl.arange(0, BLOCK_M)  # rows within the document
        offs_n = tl.arange(0, BLOCK_N)
        offs_d = tl.arange(0, HEAD_DIM)
        rows = (doc_start + offs_m).to(tl.int64)
        q = tl.load(
            Q + rows[:, None] * stride_qt + head * stride_qh + offs_d[None, :],
            mask=offs_m[:, None] < doc_len,
            other=0.0,
        )
        first = doc_start.to(tl.int64)
        k_base = K + first * stride_kt + kv_head * stride_kh
        v_base = V + first * stride_vt + kv_head * stride_vh
        if TMA:  # this document's rows of this K/V head; rows past its end read as zeros
            k_base = tl.make_tensor_descriptor(
                k_base, [doc_len, HEAD_DIM], [stride_kt, 1], [BLOCK_N, HEAD_DIM]
            )
            v_base = tl.make_tensor_descriptor(
                v_base, [doc_len, HEAD_DIM], [stride_vt, 1], [BLOCK_N, HEAD_DIM]
            )
        m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
        l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
        acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
        qk_scale = SM_SCALE * 1.44269504  # exp(x) = exp2(x * log2(e))
        # the document's keys this block sees: whole blocks left of its first row (no mask),
        # then the diagonal and the document's tail (masked); triton-flash's own loop
        full_hi = m_start // BLOCK_N * BLOCK_N
        hi = tl.minimum(m_start + BLOCK_M, doc_len)
        acc, l_i, m_i = _attn_blocks(
            acc, l_i, m_i, q, k_base, v_base, stride_kt, 1, stride_vt, 1, offs_m, offs_n,
            offs_d, 0, full_hi, doc_len, qk_scale, False, True, 0, BLOCK_N, TMA,
        )  # fmt: skip
        acc, l_i, m_i = _attn_blocks(
            acc, l_i, m_i, q, k_base, v_base, stride_kt, 1, stride_vt, 1, offs_m, offs_n,
            offs_d, full_hi, hi, doc_len, qk_scale, True, True, 0, BLOCK_N, TMA,
        )  # fmt: skip
        out = acc / tl.where(l_i == 0.0, 1.0, l_i)[:, None]
        tl.store(
            Out + rows[:, None] * stride_ot + head * stride_oh + offs_d[None, :],
            out.to(Out.dtype.element_ty),
            mask=offs_m[:, None] < doc_len,
        )


def block_table(lengths, device):
    """(first row of the document, its length, the block's first row in it) per query block,
    as three int32 columns (variants.varlen.query_blocks: those that see the most keys first)."""
    columns = list(zip(*query_blocks(lengths, BLOCK_M)))
    return tuple(torch.tensor(c, dtype=torch.int32, device=device) for c in columns)


def launch(q, k, v, doc_start, doc_len, block_start, wrap=None):
    out = torch.empty_like(q)
    kernel = wrap(_varlen_fwd) if wrap else _varlen_fwd
    dim = q.shape[-1]
    tma = tma_ok(q, k, v)
    if tma and not INTERPRET:  # eager Triton's descriptors need scratch (Inductor sets its own)
        ensure_allocator()
    kernel[(doc_start.shape[0], q.shape[1])](
        q, k, v, out, doc_start, doc_len, block_start,
        q.stride(0), q.stride(1), k.stride(0), k.stride(1), v.stride(0), v.stride(1),
        out.stride(0), out.stride(1), q.shape[1] // k.shape[1],
        SM_SCALE=1.0 / math.sqrt(dim), HEAD_DIM=dim, BLOCK_M=BLOCK_M, TMA_OK=tma,
    )  # fmt: skip
    return out


_launch_interpreted = outside_compile(launch)


if triton is not None and hasattr(torch.library, "triton_op"):

    @torch.library.triton_op(OP_NAME, mutates_args=())
    def varlen_op(
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        doc_start: torch.Tensor,
        doc_len: torch.Tensor,
        block_start: torch.Tensor,
    ) -> torch.Tensor:
        return launch(q, k, v, doc_start, doc_len, block_start, torch.library.wrap_triton)
else:  # torch < 2.6: no triton_op; eager only
    varlen_op = launch


def prepare(q, k, v, lengths):
    check_runtime("triton-flash-varlen", q.device)
    check_head("triton-flash-varlen", q)
    return (q, k, v, *block_table(lengths, q.device))


def attention(q, k, v, doc_start, doc_len, block_start):
    if q.device.type != "cuda":  # the interpreter runs on host tensors, not through an op
        return _launch_interpreted(q, k, v, doc_start, doc_len, block_start)
    return varlen_op(q, k, v, doc_start, doc_len, block_start)


def unpack(out, lengths):
    return out


def workload(shape, dtype: str, device: str):
    return varlen_workload(shape, dtype, device, attention, prepare, unpack)
