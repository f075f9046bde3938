"""What the varlen variants share: the packed inputs of a ragged batch, the float64 reference
computed per document, and the Workload each returns (compilekit/model/varlen.py has the
shape; compilekit/model/workload.py the Workload).

Every variant starts from the same packed q [T, H, D] and k, v [T, H_kv, D] (the documents one
after another, causal within each) and builds its own layout from them in `prepare`: a padded
batch, nested tensors, a block mask, cumulative offsets. That is setup, timed on its own and
kept out of the timed calls; the timed call is the attention alone. Its output goes back to the
packed layout (`unpack`) only to be checked.
"""

import time

import torch

from compilekit.model.varlen import causal_pairs
from compilekit.model.workload import Workload

# Bytes of float64 scores the reference holds at once (one document's heads, a few at a time).
REFERENCE_CHUNK_BYTES = 1 << 30


def packed_inputs(shape, dtype: str, device: str):
    """q [T, H, D], k and v [T, H_kv, D], seeded by the cell (workload.build seeds torch),
    drawn in float32 so that every dtype sees the same values."""
    total = sum(shape.lengths)
    q = torch.randn(total, shape.heads, shape.head_dim)
    k, v = (torch.randn(total, shape.kv_heads, shape.head_dim) for _ in range(2))
    return tuple(t.to(device=device, dtype=getattr(torch, dtype)) for t in (q, k, v))


def offsets(lengths, device) -> torch.Tensor:
    """Cumulative sequence offsets [N + 1] (int32): document i is rows offsets[i]:offsets[i+1]."""
    out = torch.zeros(len(lengths) + 1, dtype=torch.int32)
    out[1:] = torch.tensor(lengths, dtype=torch.int64).cumsum(0)
    return out.to(device)


def reference(q, k, v, lengths) -> torch.Tensor:
    """float64 causal attention per document over packed q, k, v (GQA by repeating K/V heads)."""
    q, k, v = (t.to(torch.float64) for t in (q, k, v))
    group = q.shape[1] // k.shape[1]
    out = torch.empty_like(q)
    start = 0
    for n in lengths:
        rows = slice(start, start + n)
        qd = q[rows].transpose(0, 1)  # [H, n, D]
        kd, vd = (t[rows].transpose(0, 1).repeat_interleave(group, 0) for t in (k, v))
        drop = torch.ones(n, n, dtype=torch.bool, device=q.device).triu(1)
        step = max(1, REFERENCE_CHUNK_BYTES // (n * n * 8))
        for h in range(0, q.shape[1], step):
            heads = slice(h, h + step)
            scores = qd[heads] @ kd[heads].transpose(-2, -1) / q.shape[-1] ** 0.5
            probs = torch.softmax(scores.masked_fill(drop, float("-inf")), dim=-1)
            out[rows, heads] = (probs @ vd[heads]).transpose(0, 1)
        start += n
    return out


def query_blocks(lengths, block_m: int) -> list[tuple[int, int, int]]:
    """(first row of the document, its length, the block's first row in it) for every block of
    block_m query rows of every document of a packed batch, the blocks that see the most keys
    first (a causal block sees its document up to its last row), so that the longest programs
    start first and the short ones fill the tail; among blocks of equal work, in the order of
    the batch."""
    starts, total = [], 0
    for n in lengths:
        starts.append(total)
        total += n
    return sorted(
        ((starts[i], n, m) for i, n in enumerate(lengths) for m in range(0, n, block_m)),
        key=lambda block: -min(block[2] + block_m, block[1]),
    )


def padding_waste(lengths) -> float:
    """The share of the query-key pairs causal attention over the batch padded to its longest
    document computes that involve padding: 1 - sum L(L+1)/2 / (N * Lmax(Lmax+1)/2)."""
    longest = max(lengths)
    return 1 - causal_pairs(lengths) / (len(lengths) * longest * (longest + 1) / 2)


def repeated_kv(q, k, v):
    """k and v with each K/V head repeated for the query heads that share it (GQA), for a
    layout with no GQA of its own."""
    group = q.shape[1] // k.shape[1]
    return tuple(t.repeat_interleave(group, dim=1) for t in (k, v))


def workload(shape, dtype: str, device: str, attention, prepare, unpack, padded=False):
    """The Workload of a varlen variant over the cell's packed inputs: `prepare(q, k, v,
    lengths)` builds the inputs of `attention` (timed here as setup), `unpack(out, lengths)`
    takes its output back to packed [T, H, D] for the check; FLOPs from the real lengths
    (4 H D sum L(L+1)/2), whatever the layout computes; padded: its padding waste is reported."""
    lengths = list(shape.lengths)
    packed = packed_inputs(shape, dtype, device)
    sync = torch.cuda.synchronize if torch.device(device).type == "cuda" else (lambda: None)
    sync()
    start = time.perf_counter()
    inputs = prepare(*packed, lengths)
    sync()
    setup_s = time.perf_counter() - start
    return Workload(
        attention,
        tuple(inputs),
        flops=4.0 * shape.heads * shape.head_dim * causal_pairs(lengths),
        truth=lambda: reference(*packed, lengths),
        unpack=lambda out: unpack(out, lengths),
        varlen={
            "setup_s": setup_s,
            "padding_waste": padding_waste(lengths) if padded else 0.0,
            "real_pairs": causal_pairs(lengths),
        },
    )
