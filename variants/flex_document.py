"""FlexAttention over the packed sequence with a document-causal block mask: a query sees the
keys of its own document up to itself; blocks across documents are skipped, not computed. The
mask is built in the setup. Eagerly flex materialises every score (T x T): run it compiled."""

import torch
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

from compilekit.variants.varlen import workload as varlen_workload

DESCRIPTION = "flex_attention with a document-causal BlockMask over the packed sequence"


def prepare(q, k, v, lengths):
    """[1, H, T, D] each and the block mask."""
    document = torch.repeat_interleave(
        torch.arange(len(lengths), device=q.device), torch.tensor(lengths, device=q.device)
    )

    def document_causal(b, h, q_idx, kv_idx):
        return (document[q_idx] == document[kv_idx]) & (q_idx >= kv_idx)

    total = sum(lengths)
    mask = create_block_mask(document_causal, None, None, total, total, device=q.device)
    return (*(t.transpose(0, 1).unsqueeze(0).contiguous() for t in (q, k, v)), mask)


def attention(q, k, v, block_mask):
    return flex_attention(q, k, v, block_mask=block_mask, enable_gqa=q.shape[1] != k.shape[1])


def unpack(out, lengths):
    return out[0].transpose(0, 1)  # [T, H, D]


def workload(shape, dtype: str, device: str):
    return varlen_workload(shape, dtype, device, attention, prepare, unpack)
