"""The blog's step 2: the naive walk with in-place scale and mask (04_b); the DtoD copy goes."""

import math

import torch

from compilekit.variants.masks import causal_flops as flops  # noqa: F401  (FLOPs this variant does)
from compilekit.variants.naive import causal_mask

DESCRIPTION = "naive with in-place mul_ and masked_fill_ (the blog's 04_b)"


def attention(q, k, v):
    # q, k, v: (B, H, S, D)
    mask = causal_mask(q.shape[-2], q.device)
    scores = torch.matmul(q, k.transpose(-2, -1))  # (B, H, S, S), a fresh buffer we may overwrite
    scores.mul_(1.0 / math.sqrt(q.shape[-1]))
    scores.masked_fill_(mask, float("-inf"))
    attn = torch.softmax(scores, dim=-1)
    return torch.matmul(attn, v)  # (B, H, S, D)


if __name__ == "__main__":  # this variant alone: its time and error at the default shape
    from compilekit.variants.standalone import main

    raise SystemExit(main(__file__, attention, globals().get("reference")))
