"""SDPA over nested jagged tensors (torch.nested, layout=torch.jagged): each document its own
length, causal, no padding; torch runs the flash or memory-efficient varlen kernel underneath
(CUDA: its math path takes no causal mask on nested tensors). With GQA the K/V heads are
repeated in the setup (nested SDPA has no enable_gqa)."""

import torch
import torch.nn.functional as F

from compilekit.variants.varlen import offsets, repeated_kv
from compilekit.variants.varlen import workload as varlen_workload

DESCRIPTION = "F.scaled_dot_product_attention(is_causal=True) over nested jagged tensors"


def prepare(q, k, v, lengths):
    """Nested [N, H, j, D] views of the packed tensors (no copy of q)."""
    k, v = repeated_kv(q, k, v)
    offs = offsets(lengths, q.device).long()
    return tuple(
        torch.nested.nested_tensor_from_jagged(t, offs).transpose(1, 2) for t in (q, k, v)
    )


def attention(q, k, v):
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def unpack(out, lengths):
    return out.transpose(1, 2).values()  # packed [T, H, D]


def workload(shape, dtype: str, device: str):
    return varlen_workload(shape, dtype, device, attention, prepare, unpack)
