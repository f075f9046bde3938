"""FlexAttention with a causal block mask: fully masked blocks are skipped, not computed."""

from torch.nn.attention.flex_attention import create_block_mask, flex_attention

from variants.masks import causal_flops as flops  # noqa: F401  (FLOPs this variant does)

DESCRIPTION = "flex_attention with a causal BlockMask (fast only when compiled)"

_BLOCK_MASKS: dict = {}


def causal(b, h, q_idx, kv_idx):
    return q_idx >= kv_idx


def block_mask(mask_mod, seq: int, device):
    """One BlockMask per (mask, S, device), built once outside the timed calls like the naive
    mask."""
    key = (mask_mod.__name__, seq, str(device))
    if key not in _BLOCK_MASKS:
        _BLOCK_MASKS[key] = create_block_mask(mask_mod, None, None, seq, seq, device=device)
    return _BLOCK_MASKS[key]


def causal_block_mask(seq: int, device):
    return block_mask(causal, seq, device)


def attention(q, k, v):
    return flex_attention(q, k, v, block_mask=causal_block_mask(q.shape[-2], q.device))
