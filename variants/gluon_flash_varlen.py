"""gluon-flash over a ragged batch on Hopper: packed q [T, H, D] and k, v [T, H_kv, D], causal
within each document, GQA, D = 64 or 128, bfloat16 or float16.

It runs gluon-flash's persistent kernel (a TMA loader warp beside two consumer warpgroups that
take turns on the tensor cores, one program per SM) with VARLEN on:
- A tile is one block of 128 query rows of one document, for one head. The setup lays every
  document's blocks in a table (variants.varlen.query_blocks) and deals the (block, head) tiles
  to the programs, each to the one with the least work so far (variants.launch.deal). No
  padding row is computed, and no key block before the document's first row is read.
- The tiles are dealt document by document (ORDER "document"), as FlashAttention-3's
  schedulers walk a varlen batch, the longest document first: within one, its heads in groups
  whose K and V fit L2 together (launch.l2_group_heads, as gluon-flash groups its rows, and
  FA3 its heads); within a group, its query blocks heaviest first, the heads that share a K/V
  head side by side. The tiles running at once then read one document's K and V, from L2 after
  the first. ORDER "work" deals every tile of the batch heaviest first instead, as
  triton-flash-varlen's grid runs them: the balance of strict longest-processing-time order,
  and little reuse of K and V beyond a block's heads: 3% slower on an H100 at T = 64k, GQA
  32/8, D = 128 (398.7 against 411.6 effective TFLOP/s at lognormal lengths of mean 512, 548.3
  against 563.6 at mean 2k; dev/results/h100/varlen_gluon_fdbbf6bd).
- The descriptors are over the packed tensors seen as [1, H, T, D]. A tile's key blocks start at
  its document's first row, so the causal mask, counted from there, is the only mask a tile
  needs. A document's last block also reads the next document's rows (zeros past T); only its
  rows past the document's end see them.
- Those rows are never stored. A tile whose rows cross the document's end stores its O from
  registers, masked; every other tile's O leaves through TMA, as gluon-flash's does.

On that H100 it is 1.46x and 1.33x triton-flash-varlen in the same process (411.6 and 563.6
effective TFLOP/s). Under torch.compile it is an opaque op (compilekit::gluon_flash_varlen).
Varlen shape (compilekit/model/varlen.py); anything but a Hopper GPU is refused with the
reason.
"""

import math

import torch

from compilekit.variants import gluon_flash
from compilekit.variants.launch import deal, l2_group_heads
from compilekit.variants.varlen import query_blocks
from compilekit.variants.varlen import workload as varlen_workload

DESCRIPTION = "hand-written Gluon flash attention over packed documents (Hopper, persistent)"
NAME = "gluon-flash-varlen"
# the order the tiles are dealt in: "document" or "work" (the module's docstring)
ORDER = "document"


def tile_settings(head_dim: int) -> dict:
    """gluon-flash's persistent tiles at this head dim (128 query rows, two consumers of 64)."""
    return gluon_flash.tiles(head_dim, 1 << 30)


def schedule(lengths, heads: int, kv_group: int, cfg: dict, programs: int, order: str = ""):
    """(blocks, tiles, starts) as flat int lists: `blocks` the query blocks' table, three
    numbers a block (its document's first row, length, the block's first row in it); tile
    number block * heads + head; program p runs tiles[starts[p]:starts[p + 1]], dealt in
    `order` (ORDER by default) by their key blocks (the block's rows from the document's start,
    rounded up to cfg's BLOCK_N). cfg: the tile settings (BLOCK_M, BLOCK_N, HEAD_DIM)."""
    block_m, block_n = cfg["BLOCK_M"], cfg["BLOCK_N"]
    table = query_blocks(lengths, block_m)
    if (order or ORDER) == "work":  # the table's order: heaviest first, heads fastest
        ordered = list(range(len(table) * heads))
    else:
        ordered = _document_order(table, heads, kv_group, cfg["HEAD_DIM"])
    work = [-(-min(m + block_m, n) // block_n) for _, n, m in (table[t // heads] for t in ordered)]
    dealt, starts = deal(work, min(programs, len(work)))
    return [x for row in table for x in row], [ordered[i] for i in dealt], starts


def _document_order(table, heads: int, kv_group: int, head_dim: int) -> list[int]:
    """Tile numbers document by document (the module's docstring): documents longest first,
    each one's heads in L2 groups, each group's query blocks in the table's order (heaviest
    first) with its heads side by side."""
    # a document's first row -> its rows of the table; the table's first block of a document
    # sees all of it, so the documents come longest first
    blocks_of: dict[int, list[int]] = {}
    for row, (start, _, _) in enumerate(table):
        blocks_of.setdefault(start, []).append(row)
    ordered = []
    for rows in blocks_of.values():
        length = table[rows[0]][1]
        # 2 bytes an element: bfloat16 or float16, all the kernel computes
        group = min(heads, l2_group_heads(length, head_dim, 2, kv_group))
        for first in range(0, heads, group):
            for row in rows:
                ordered.extend(row * heads + h for h in range(first, min(first + group, heads)))
    return ordered


def _packed_view(t):
    """[T, H, D] seen as [1, H, T, D]: the layout gluon-flash's descriptors read."""
    return t.unsqueeze(0).transpose(1, 2)


def launch(q, k, v, blocks, tiles, starts):
    """The kernel over the setup's schedule; returns O, packed as q."""
    total, heads, dim = q.shape
    out = torch.empty_like(q)
    cfg = tile_settings(dim)
    kernel, q_rows, _ = gluon_flash.schedule_of(cfg)
    kv_rows = cfg["BLOCK_N"]
    descs = [
        gluon_flash._descriptor(_packed_view(t), rows)
        for t, rows in ((q, q_rows), (k, kv_rows), (v, kv_rows), (out, q_rows))
    ]
    kernel[(starts.shape[0] - 1, 1)](
        *descs, heads, heads // k.shape[1], total, 1, 1, tiles, starts, blocks, out,
        out.stride(0), out.stride(1),
        SM_SCALE=1.0 / math.sqrt(dim), HEAD_DIM=dim, CAUSAL=True, BLOCK_M=cfg["BLOCK_M"],
        BLOCK_N=cfg["BLOCK_N"], STAGES=cfg["STAGES"], Q_STAGES=cfg["Q_STAGES"],
        SHORT_K=cfg["SHORT_K"], PINGPONG=cfg["PINGPONG"], VARLEN=True,
        num_warps=cfg["num_warps"],
    )  # fmt: skip
    return out


# The op torch.compile calls, beside gluon-flash's on the same namespace (Inductor cannot see
# into a Gluon kernel)
_LIB = torch.library.Library(gluon_flash.OP_NAMESPACE, "FRAGMENT")
_LIB.define(
    "gluon_flash_varlen(Tensor q, Tensor k, Tensor v, Tensor blocks, Tensor tiles, "
    "Tensor starts) -> Tensor"
)
_LIB.impl("gluon_flash_varlen", launch, "CompositeExplicitAutograd")


@torch.library.register_fake(f"{gluon_flash.OP_NAMESPACE}::gluon_flash_varlen", lib=_LIB)
def _(q, k, v, blocks, tiles, starts):
    return torch.empty_like(q)


_op = getattr(torch.ops, gluon_flash.OP_NAMESPACE).gluon_flash_varlen.default


def prepare(q, k, v, lengths):
    """The setup: check what the kernel computes, then the block table and its schedule over
    the device's SMs, on the device."""
    views = [_packed_view(t) for t in (q, k, v)]
    gluon_flash.check_inputs(*views, name=NAME)
    cfg = {**tile_settings(q.shape[-1]), "HEAD_DIM": q.shape[-1]}
    group = q.shape[1] // k.shape[1]
    lists = schedule(lengths, q.shape[1], group, cfg, gluon_flash._sm_count(q.device))
    return (q, k, v, *(torch.tensor(x, dtype=torch.int32, device=q.device) for x in lists))


def attention(q, k, v, blocks, tiles, starts):
    if torch.compiler.is_compiling():
        return _op(q, k, v, blocks, tiles, starts)
    return launch(q, k, v, blocks, tiles, starts)


def unpack(out, lengths):
    return out


def workload(shape, dtype: str, device: str):
    return varlen_workload(shape, dtype, device, attention, prepare, unpack)
