"""The blog's step 1: causal attention written out op by op (04_a_naive)."""

import math

import torch

from compilekit.variants.masks import causal_flops as flops  # noqa: F401  (FLOPs this variant does)

DESCRIPTION = "q@kT, scale, masked_fill with a triu mask, softmax, @v (the blog's 04_a)"

# The blog builds the mask once, outside the timed loop; keep one per (S, device) the same way.
_MASKS: dict = {}


def causal_mask(seq: int, device: torch.device) -> torch.Tensor:
    """Boolean (S, S) mask, True above the diagonal (the positions a query may not see)."""
    key = (seq, str(device))
    if key not in _MASKS:
        _MASKS[key] = torch.triu(torch.ones(seq, seq, dtype=torch.bool, device=device), 1)
    return _MASKS[key]


def attention(q, k, v):
    # q, k, v: (B, H, S, D)
    mask = causal_mask(q.shape[-2], q.device)
    scores = torch.matmul(q, k.transpose(-2, -1))  # (B, H, S, S)
    scores = scores * (1.0 / math.sqrt(q.shape[-1]))
    scores = scores.masked_fill(mask, float("-inf"))
    attn = torch.softmax(scores, dim=-1)
    return torch.matmul(attn, v)  # (B, H, S, D)


if __name__ == "__main__":  # this variant alone: its time and error at the default shape
    from compilekit.variants.standalone import main

    raise SystemExit(main(__file__, attention, globals().get("reference")))
