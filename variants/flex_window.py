"""FlexAttention with a causal sliding-window block mask: blocks outside the window are skipped."""

from torch.nn.attention.flex_attention import flex_attention

from compilekit.variants.flex import block_mask
from compilekit.variants.masks import WINDOW
from compilekit.variants.masks import window_flops as flops  # noqa: F401  (FLOPs this variant does)
from compilekit.variants.masks import window_reference as reference  # noqa: F401  (its float64 truth)

DESCRIPTION = "flex_attention with a causal sliding-window BlockMask of 256 keys"


def sliding_window(b, h, q_idx, kv_idx):
    return (q_idx >= kv_idx) & (q_idx - kv_idx < WINDOW)


def attention(q, k, v):
    return flex_attention(q, k, v, block_mask=block_mask(sliding_window, q.shape[-2], q.device))


if __name__ == "__main__":  # this variant alone: its time and error at the default shape
    from compilekit.variants.standalone import main

    raise SystemExit(main(__file__, attention, globals().get("reference")))
