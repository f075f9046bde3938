"""Dense SDPA over a ragged batch padded to its longest document, with a padding-and-causal
mask: what a batch of documents costs the simple way. Varlen shape (compilekit/model/varlen.py).
With GQA the K/V heads are repeated in the setup (SDPA takes an arbitrary mask only without
enable_gqa on its memory-efficient kernel)."""

import torch
import torch.nn.functional as F

from compilekit.variants.varlen import repeated_kv
from compilekit.variants.varlen import workload as varlen_workload

DESCRIPTION = "F.scaled_dot_product_attention over the batch padded to its longest document"


def prepare(q, k, v, lengths):
    """[N, H, Lmax, D] each, and the mask [N, 1, Lmax, Lmax]: causal, and no padding key (a
    padding query row still sees key 0, so no row is all -inf)."""
    longest = max(lengths)
    k, v = repeated_kv(q, k, v)

    def pad(t):
        out = t.new_zeros(len(lengths), longest, *t.shape[1:])
        start = 0
        for i, n in enumerate(lengths):
            out[i, :n] = t[start : start + n]
            start += n
        return out.transpose(1, 2).contiguous()

    rows = torch.arange(longest, device=q.device)
    causal = rows[:, None] >= rows[None, :]
    real_key = rows[None, :] < torch.tensor(lengths, device=q.device)[:, None]
    mask = causal[None] & real_key[:, None, :]
    return pad(q), pad(k), pad(v), mask[:, None]


def attention(q, k, v, mask):
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


def unpack(out, lengths):
    """[N, H, Lmax, D] -> the real rows, packed [T, H, D]."""
    return torch.cat([out[i, :, :n].transpose(0, 1) for i, n in enumerate(lengths)])


def workload(shape, dtype: str, device: str):
    return varlen_workload(shape, dtype, device, attention, prepare, unpack, padded=True)
