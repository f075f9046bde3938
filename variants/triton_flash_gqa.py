"""triton-flash with grouped-query attention: GQA_GROUP query heads per K/V head."""

from compilekit.variants.masks import causal_flops as flops  # noqa: F401  (FLOPs this variant does)
from compilekit.variants.masks import gqa_reference as reference  # noqa: F401
from compilekit.variants.masks import shared_kv
from compilekit.variants.triton_flash import flash_attention

DESCRIPTION = "triton-flash, causal, 4 query heads per K/V head (GQA)"


def attention(q, k, v):
    k, v = shared_kv(q, k, v)  # (B, H / 4, S, D)
    return flash_attention(q, k, v, causal=True)


if __name__ == "__main__":  # this variant alone: its time and error at the default shape
    from compilekit.variants.standalone import main

    raise SystemExit(main(__file__, attention, globals().get("reference")))
