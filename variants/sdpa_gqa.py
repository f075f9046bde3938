"""SDPA with grouped-query attention (enable_gqa=True): K/V heads are not repeated in memory."""

import torch.nn.functional as F

from compilekit.variants.masks import causal_flops as flops  # noqa: F401  (FLOPs this variant does)
from compilekit.variants.masks import causal_sdpa_kwargs, shared_kv
from compilekit.variants.masks import gqa_reference as reference  # noqa: F401

DESCRIPTION = (
    "F.scaled_dot_product_attention(is_causal=True, enable_gqa=True), 4 query heads per K/V head"
)


def attention(q, k, v):
    k, v = shared_kv(q, k, v)  # (B, H / 4, S, D)
    return F.scaled_dot_product_attention(q, k, v, **causal_sdpa_kwargs(q, k))  # enable_gqa


if __name__ == "__main__":  # this variant alone: its time and error at the default shape
    from compilekit.variants.standalone import main

    raise SystemExit(main(__file__, attention, globals().get("reference")))
