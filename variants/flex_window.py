"""FlexAttention with a causal sliding-window block mask: blocks outside the window are skipped."""

from torch.nn.attention.flex_attention import create_block_mask, flex_attention

from variants.masks import WINDOW, window_reference as reference  # noqa: F401

DESCRIPTION = "flex_attention with a causal sliding-window BlockMask of 256 keys"

_BLOCK_MASKS: dict = {}


def sliding_window(b, h, q_idx, kv_idx):
    return (q_idx >= kv_idx) & (q_idx - kv_idx < WINDOW)


def window_block_mask(seq: int, device):
    key = (seq, str(device))
    if key not in _BLOCK_MASKS:
        _BLOCK_MASKS[key] = create_block_mask(sliding_window, None, None, seq, seq, device=device)
    return _BLOCK_MASKS[key]


def attention(q, k, v):
    return flex_attention(q, k, v, block_mask=window_block_mask(q.shape[-2], q.device))
