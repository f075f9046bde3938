"""What the GQA and sliding-window variants share: how K/V heads are shared, the window, and
the float64 reference they are all checked against.

A cell's k and v have the query heads ([B, H, S, D], or [B, H, Q, D] for q and [B, H, K, D] for
k and v at a decode shape BxHxQxKxD) unless its shape names fewer (BxHgGx...: G K/V heads, as a
GQA model holds them). From full heads a GQA variant keeps every GQA_GROUP-th K/V head (H /
GQA_GROUP of them), so each implementation is handed the same reduced K/V; from a GQA shape it
takes them as they are.
"""

import math

import torch

from compilekit.model.errors import Unsupported

GQA_GROUP = 4  # query heads per K/V head
WINDOW = 256  # a query sees itself and the WINDOW - 1 keys before it
# Bytes of float64 scores one chunk of a reference holds: all at once, S = 16384 at B = 4, H = 16
# would need 137 GB (experiments/kernel.toml runs triton-flash there).
REFERENCE_CHUNK_BYTES = 1 << 30


def attention_flops(shape, causal: bool = True, window: int = 0) -> float:
    """FLOPs of the two matmuls over the (query, key) pairs a mask keeps: 4·B·H·D per pair.

    Pairs per head: S² without a mask, S(S+1)/2 causal, S·W - W(W-1)/2 for a causal window of
    W keys (W < S); Q queries over K keys (BxHxQxKxD), the last Q of K positions: Q·K, causal
    Q(K-Q) + Q(Q+1)/2. GQA shares K/V heads but every query head still does its own work, so H is
    the query heads.
    """
    seq = shape.seq
    keys = getattr(shape, "keys", seq)
    if keys != seq:  # Q queries, the last of K positions (bottom-right): no window here
        pairs = seq * (keys - seq) + seq * (seq + 1) / 2 if causal else seq * keys
        return 4.0 * shape.batch * shape.heads * shape.head_dim * pairs
    if window and window < seq:
        pairs = seq * window - window * (window - 1) / 2
    elif causal or window:
        pairs = seq * (seq + 1) / 2
    else:
        pairs = seq * seq
    return 4.0 * shape.batch * shape.heads * shape.head_dim * pairs


def causal_flops(shape) -> float:
    """attention_flops for the causal mask (most variants declare this one)."""
    return attention_flops(shape, causal=True)


def window_flops(shape) -> float:
    """attention_flops for the causal window of WINDOW keys."""
    return attention_flops(shape, causal=True, window=WINDOW)


def shared_kv(q, k, v, group: int = GQA_GROUP):
    """K/V with H / group heads (every group-th head), as a GQA model would hold them; K/V that
    already have fewer heads than q (a BxHgGx... shape) as they are. The copy the slicing makes
    is timed with the call: a decode shape should name its K/V heads instead."""
    if k.shape[1] < q.shape[1]:
        return k, v
    if k.shape[1] % group:
        raise Unsupported(
            f"GQA with groups of {group} needs heads divisible by {group}, "
            f"not {k.shape[1]}: pick a shape with H a multiple of {group}"
        )
    return k[:, ::group].contiguous(), v[:, ::group].contiguous()  # (B, H / group, S, D)


def check_shapes(variant: str, q, k, v) -> None:
    """Refuse (Unsupported, naming `variant`) inputs a flash kernel does not take: q [B, H, S, D]
    and k, v [B, H_kv, S, D] with H_kv dividing H."""
    if (
        q.dim() != 4
        or k.shape != v.shape
        or q.shape[0] != k.shape[0]
        or q.shape[3] != k.shape[3]
        or q.shape[2] > k.shape[2]
    ):
        raise Unsupported(
            f"{variant} wants q [B, H, Q, D] and k, v [B, H_kv, K, D], Q <= K; got "
            f"{tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}"
        )
    if q.shape[1] % k.shape[1]:
        raise Unsupported(f"K/V heads ({k.shape[1]}) must divide query heads ({q.shape[1]})")


def reference(q, k, v, causal: bool = True, window: int = 0):
    """float64 truth: GQA by repeating K/V heads, causal and window masks written out; computed
    a few (batch, head) pairs at a time, so its float64 scores stay within
    REFERENCE_CHUNK_BYTES."""
    q, k, v = (t.to(torch.float64) for t in (q, k, v))
    batch, heads, seq, dim = q.shape
    keys = k.shape[2]
    group = heads // k.shape[1]
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    # query i sits at position keys - seq + i: the queries are the sequence's last positions
    i = torch.arange(seq, device=q.device)[:, None] + (keys - seq)
    j = torch.arange(keys, device=q.device)[None, :]
    drop = torch.zeros(seq, keys, dtype=torch.bool, device=q.device)
    if causal:
        drop |= i < j
    if window:
        drop |= (i - j) >= window
    q = q.reshape(batch * heads, seq, dim)
    k, v = (t.reshape(batch * heads, keys, dim) for t in (k, v))
    out = torch.empty_like(q)
    step = max(1, REFERENCE_CHUNK_BYTES // (seq * keys * 8))
    for start in range(0, batch * heads, step):
        part = slice(start, start + step)
        scores = q[part] @ k[part].transpose(-2, -1) / math.sqrt(dim)
        out[part] = torch.softmax(scores.masked_fill(drop, float("-inf")), dim=-1) @ v[part]
    return out.reshape(batch, heads, seq, dim)


def gqa_reference(q, k, v):
    return reference(q, *shared_kv(q, k, v), causal=True)


def window_reference(q, k, v):
    return reference(q, k, v, causal=True, window=WINDOW)


def causal_sdpa_kwargs(q, k) -> dict:
    """F.scaled_dot_product_attention's causal arguments for q [.., Q, D] over k [.., K, D]:
    is_causal where Q == K; else the queries are the last Q positions (bottom-right), which
    is_causal does not mean when the lengths differ (it aligns top-left): no mask for one
    query (it sees every key), torch's lower-right causal bias for several; enable_gqa where
    k has fewer heads than q."""
    gqa = {"enable_gqa": True} if k.shape[-3] != q.shape[-3] else {}  # fewer K/V heads
    queries, keys = q.shape[-2], k.shape[-2]
    if queries == keys:
        return {"is_causal": True, **gqa}
    if queries == 1:
        return gqa
    from torch.nn.attention.bias import causal_lower_right

    return {"attn_mask": causal_lower_right(queries, keys), **gqa}
