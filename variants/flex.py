"""FlexAttention with a causal block mask: fully masked blocks are skipped, not computed."""

from torch.nn.attention.flex_attention import create_block_mask, flex_attention

from compilekit.variants.masks import causal_flops as flops  # noqa: F401  (FLOPs this variant does)

DESCRIPTION = "flex_attention with a causal BlockMask (fast only when compiled)"

# Outside Inductor (the `cudagraphs` backend runs the traced graph as it is), flex_attention
# takes its dense fallback, which makes a tensor from a Python scalar inside the CUDA graph
# capture: a host-to-device copy, which capture forbids (measured on the H200, torch 2.11; vLLM
# turns CUDA graphs off for its flex backend for the same reason, vllm-project/vllm#25358).
KNOWN_LIMITS = {
    "cudagraphs": "flex_attention needs Inductor to be captured in a CUDA graph: without it, "
    "its dense fallback copies a host scalar to the GPU during capture (use reduce-overhead)",
}

_BLOCK_MASKS: dict = {}


def causal(b, h, q_idx, kv_idx):
    return q_idx >= kv_idx


def block_mask(mask_mod, seq: int, device, keys: int = 0):
    """One BlockMask per (mask, Q, K, device), built once outside the timed calls like the
    naive mask."""
    keys = keys or seq
    key = (mask_mod.__name__, seq, keys, str(device))
    if key not in _BLOCK_MASKS:
        _BLOCK_MASKS[key] = create_block_mask(mask_mod, None, None, seq, keys, device=device)
    return _BLOCK_MASKS[key]


def causal_block_mask(seq: int, device, keys: int = 0):
    """Causal over `seq` queries; over more keys, the queries are the last `seq` positions
    (bottom-right, as at decode): query i sees keys up to keys - seq + i. None for one query,
    which sees every key: flex_attention then masks nothing (and Inductor has no mask_mod to
    lower, which fails over a long cache on torch 2.11's GPU path and on the CPU's)."""
    if seq == 1:
        return None
    if not keys or keys == seq:
        return block_mask(causal, seq, device)
    offset = keys - seq

    def causal_bottom_right(b, h, q_idx, kv_idx):
        return q_idx + offset >= kv_idx

    return block_mask(causal_bottom_right, seq, device, keys)


def attention(q, k, v):
    mask = causal_block_mask(q.shape[-2], q.device, k.shape[-2])
    return flex_attention(q, k, v, block_mask=mask, enable_gqa=k.shape[1] != q.shape[1])


if __name__ == "__main__":  # this variant alone: its time and error at the default shape
    from compilekit.variants.standalone import main

    raise SystemExit(main(__file__, attention, globals().get("reference")))
