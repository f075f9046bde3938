"""triton-flash over a ragged batch: packed q [T, H, D] and k, v [T, H_kv, D] with cumulative
sequence offsets, causal within each document, GQA (K/V heads dividing the heads).

The setup lays the query blocks of every document end to end in a table (the document's first
row and length, the block's first row in it), longest documents first so the longest programs
start first; one program computes one query block of one head against the keys of its own
document up to the block's last row (online softmax, as triton_flash.py). No row of padding is
computed, and no block crosses a document. Varlen shape (compilekit/model/varlen.py).
"""

import math

import torch

from variants.triton_flash import check_head, check_runtime
from variants.varlen import workload as varlen_workload

try:
    import triton
    import triton.language as tl
except ImportError:  # CPU builds of torch come without triton
    triton = None

DESCRIPTION = "hand-written Triton flash attention over packed documents (offsets, causal, GQA)"
BLOCK_M, BLOCK_N = 64, 64
OP_NAME = "compilekit::flash_varlen"

if triton is not None:

    @triton.jit
    def _varlen_fwd(
        Q, K, V, Out, DocStart, DocLen, BlockStart,
        stride_qt, stride_qh, stride_kt, stride_kh, stride_vt, stride_vh, stride_ot, stride_oh,
        GROUP,
        SM_SCALE: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr,
        BLOCK_N: tl.constexpr,
    ):  # fmt: skip
        block = tl.program_id(0)
        head = tl.program_id(1)
        kv_head = head // GROUP
        doc_start = tl.load(DocStart + block)
        doc_len = tl.load(DocLen + block)
        m_start = tl.load(BlockStart + block)
        offs_m = m_start + tl.arange(0, BLOCK_M)  # rows within the document
        offs_d = tl.arange(0, HEAD_DIM)
        real = offs_m < doc_len
        rows = (doc_start + offs_m).to(tl.int64)
        q = tl.load(
            Q + rows[:, None] * stride_qt + head * stride_qh + offs_d[None, :],
            mask=real[:, None],
            other=0.0,
        )
        m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
        l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
        acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
        end = tl.minimum(m_start + BLOCK_M, doc_len)  # causal: no key past the block's last row
        for n in range(0, end, BLOCK_N):
            offs_n = n + tl.arange(0, BLOCK_N)
            keys = (doc_start + offs_n).to(tl.int64)
            in_doc = offs_n < doc_len
            k = tl.load(
                K + keys[None, :] * stride_kt + kv_head * stride_kh + offs_d[:, None],
                mask=in_doc[None, :],
                other=0.0,
            )
            s = tl.dot(q, k) * SM_SCALE
            keep = (offs_n[None, :] <= offs_m[:, None]) & in_doc[None, :]
            s = tl.where(keep, s, float("-inf"))
            m_new = tl.maximum(m_i, tl.max(s, 1))
            m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)  # rows past the document
            p = tl.exp(s - m_safe[:, None])
            alpha = tl.exp(m_i - m_safe)
            l_i = l_i * alpha + tl.sum(p, 1)
            v = tl.load(
                V + keys[:, None] * stride_vt + kv_head * stride_vh + offs_d[None, :],
                mask=in_doc[:, None],
                other=0.0,
            )
            acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
            m_i = m_new
        out = acc / tl.where(l_i == 0.0, 1.0, l_i)[:, None]
        tl.store(
            Out + rows[:, None] * stride_ot + head * stride_oh + offs_d[None, :],
            out.to(Out.dtype.element_ty),
            mask=real[:, None],
        )


def block_table(lengths, device):
    """(first row of the document, its length, the block's first row in it) per query block,
    longest documents first."""
    starts, total = [], 0
    for n in lengths:
        starts.append(total)
        total += n
    table = [
        (starts[i], n, m)
        for i, n in sorted(enumerate(lengths), key=lambda item: -item[1])
        for m in range(0, n, BLOCK_M)
    ]
    columns = list(zip(*table))
    return tuple(torch.tensor(c, dtype=torch.int32, device=device) for c in columns)


def launch(q, k, v, doc_start, doc_len, block_start, wrap=None):
    out = torch.empty_like(q)
    kernel = wrap(_varlen_fwd) if wrap else _varlen_fwd
    dim = q.shape[-1]
    kernel[(doc_start.shape[0], q.shape[1])](
        q, k, v, out, doc_start, doc_len, block_start,
        q.stride(0), q.stride(1), k.stride(0), k.stride(1), v.stride(0), v.stride(1),
        out.stride(0), out.stride(1), q.shape[1] // k.shape[1],
        SM_SCALE=1.0 / math.sqrt(dim), HEAD_DIM=dim, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N,
    )  # fmt: skip
    return out


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
        return launch(q, k, v, doc_start, doc_len, block_start)
    return varlen_op(q, k, v, doc_start, doc_len, block_start)


def unpack(out, lengths):
    return out


def workload(shape, dtype: str, device: str):
    return varlen_workload(shape, dtype, device, attention, prepare, unpack)
