"""FlexAttention with grouped-query attention and the causal block mask."""

from torch.nn.attention.flex_attention import flex_attention

from compilekit.variants.flex import causal_block_mask
from compilekit.variants.masks import causal_flops as flops  # noqa: F401  (FLOPs this variant does)
from compilekit.variants.masks import gqa_reference as reference  # noqa: F401
from compilekit.variants.masks import shared_kv

DESCRIPTION = "flex_attention(enable_gqa=True) with a causal BlockMask, 4 query heads per K/V head"


def attention(q, k, v):
    k, v = shared_kv(q, k, v)  # (B, H / 4, S, D)
    return flex_attention(
        q, k, v, block_mask=causal_block_mask(q.shape[-2], q.device, k.shape[-2]), enable_gqa=True
    )


if __name__ == "__main__":  # this variant alone: its time and error at the default shape
    from compilekit.variants.standalone import main

    raise SystemExit(main(__file__, attention, globals().get("reference")))
