"""triton-flash with a causal sliding window: key blocks outside the window are never loaded."""

from compilekit.variants.masks import WINDOW
from compilekit.variants.masks import window_flops as flops  # noqa: F401  (FLOPs this variant does)
from compilekit.variants.masks import window_reference as reference  # noqa: F401  (its float64 truth)
from compilekit.variants.triton_flash import flash_attention

DESCRIPTION = "triton-flash, causal sliding window of 256 keys"


def attention(q, k, v):
    return flash_attention(q, k, v, causal=True, window=WINDOW)


if __name__ == "__main__":  # this variant alone: its time and error at the default shape
    from compilekit.variants.standalone import main

    raise SystemExit(main(__file__, attention, globals().get("reference")))
