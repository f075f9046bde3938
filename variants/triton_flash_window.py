"""triton-flash with a causal sliding window: key blocks outside the window are never loaded."""

from variants.masks import WINDOW, window_reference as reference  # noqa: F401
from variants.triton_flash import flash_attention

DESCRIPTION = "triton-flash, causal sliding window of 256 keys"


def attention(q, k, v):
    return flash_attention(q, k, v, causal=True, window=WINDOW)
