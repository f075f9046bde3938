"""The blog's naive attention with the mask built inside the function, as many models do."""

import math

import torch

from compilekit.variants.masks import causal_flops as flops  # noqa: F401  (FLOPs this variant does)

DESCRIPTION = "naive, with its causal mask built in the call (so a compiler can see it is causal)"


def attention(q, k, v):
    # q, k, v: (B, H, S, D)
    seq = q.shape[-2]
    mask = torch.triu(torch.ones(seq, seq, dtype=torch.bool, device=q.device), diagonal=1)
    scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
    scores = scores.masked_fill(mask, float("-inf"))
    return torch.matmul(torch.softmax(scores, dim=-1), v)


if __name__ == "__main__":  # this variant alone: its time and error at the default shape
    from compilekit.variants.standalone import main

    raise SystemExit(main(__file__, attention, globals().get("reference")))
