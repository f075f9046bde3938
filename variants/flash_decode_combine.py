"""Combining flash-decoding's splits: the partial softmax of each split of the keys (row max,
row sum, unnormalised output, float32, as variants/triton_flash_decode.py's split kernel writes
them) into each row's output. Not a variant: a helper beside masks.py.

Two ways, one result:
- `combine_kernel`, a second launch after the split kernel, one program per output row: what
  torch.compile's graph gets, since Inductor sees each kernel's reads and writes. Eagerly on
  Hopper it may be launched as a programmatic dependent launch (PDL): its programs start while
  the split kernel runs, and wait (griddepcontrol.wait) until that kernel's writes are
  visible, so the gap between the two launches shrinks to the wait's wake-up;
- `combine_last`, called by every program of the split kernel itself once its partials are
  written: the last of a (batch, K/V head)'s programs to arrive combines them all, so a call is
  one launch, which saves the second launch and the gap before it. That program combines
  alone, after every other program of its row has finished: the eager path uses it where it
  takes one step of loads (triton_flash_decode.launch; docs/decode.md has the figures). Its
  arrival counters live on the device between calls and go back to 0 as each combine ends,
  so a call (or a CUDA graph's replay) finds them ready.
  They are one set per device: two calls running at once, on two streams, would mix their
  arrivals, so the eager path takes one stream at a time.
"""

import torch

from compilekit.variants.launch import INTERPRET

try:
    import triton
    import triton.language as tl
except ImportError:  # CPU builds of torch come without triton
    triton = None
try:  # grid dependency control, for programmatic dependent launch (Triton 3.4+)
    from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait
except ImportError:
    gdc_launch_dependents = gdc_wait = None

CHUNK_VALUES = 4096  # partial outputs combine_last holds at once: a chunk of splits x rows x D

if triton is not None:

    @triton.jit
    def combine_kernel(
        Part, Out,
        stride_ob, stride_oh, stride_om, stride_od,
        KV_HEADS, GROUP, N_Q, NUM_SPLITS,
        HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_S: tl.constexpr,
        PDL: tl.constexpr,
    ):  # fmt: skip
        if PDL:  # launched before the split kernel ends: wait until its partials are written
            gdc_wait()
        bh = tl.program_id(0)
        row = tl.program_id(1)  # one of the GROUP x N_Q real rows
        slots = tl.num_programs(0).to(tl.int64) * NUM_SPLITS * BLOCK_M  # as the split kernel
        splits = tl.arange(0, BLOCK_S)
        present = splits < NUM_SPLITS
        slot = (bh * NUM_SPLITS + splits) * BLOCK_M + row
        m = tl.load(Part + slots * HEAD_DIM + slot, mask=present, other=float("-inf"))
        lsum = tl.load(Part + slots * (HEAD_DIM + 1) + slot, mask=present, other=0.0)
        m_max = tl.max(m, 0)  # finite: key 0 is seen by every query, in the first split
        w = tl.where(m == float("-inf"), 0.0, tl.exp(m - m_max))
        offs_d = tl.arange(0, HEAD_DIM)
        o = tl.load(
            Part + slot[:, None].to(tl.int64) * HEAD_DIM + offs_d[None, :],
            mask=present[:, None],
            other=0.0,
        )
        out = tl.sum(o * w[:, None], 0) / tl.sum(lsum * w, 0)
        b = bh // KV_HEADS
        head = (bh % KV_HEADS) * GROUP + row // N_Q
        o_ptrs = (
            Out
            + b.to(tl.int64) * stride_ob
            + head.to(tl.int64) * stride_oh
            + (row % N_Q) * stride_om
            + offs_d * stride_od
        )
        tl.store(o_ptrs, out.to(Out.dtype.element_ty))

    @triton.jit
    def combine_last(
        Part, Out, Counter, bh, b, kvh, slots,
        stride_ob, stride_oh, stride_om, stride_od,
        GROUP, N_Q, NUM_SPLITS,
        HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, ROWS: tl.constexpr,
        CHUNK: tl.constexpr, BLOCK_S: tl.constexpr,
    ):  # fmt: skip
        # every thread's partials are written before the arrival is released to the others
        tl.debug_barrier()
        arrived = tl.atomic_add(Counter + bh, 1, sem="acq_rel")
        if arrived == NUM_SPLITS - 1:  # the last: every split's partials are there
            tl.store(Counter + bh, 0)  # ready for the next call: no program of this one is left
            rows = tl.arange(0, ROWS)  # row r as the split kernel numbers it
            real = rows < GROUP * N_Q
            offs_d = tl.arange(0, HEAD_DIM)
            # Every split's row max and sum at once (BLOCK_S x ROWS values), so the chunks
            # below depend on nothing but these: unrolled, their loads are all in flight
            # together, where a running max would chain one L2 round trip after another.
            # .cg: from L2, where the other programs' stores are, never a stale L1 line.
            splits = tl.arange(0, BLOCK_S)
            ok = (splits < NUM_SPLITS)[:, None] & real[None, :]
            slot = (bh * NUM_SPLITS + splits)[:, None] * BLOCK_M + rows[None, :]
            m = tl.load(
                Part + slots * HEAD_DIM + slot, mask=ok, other=float("-inf"), cache_modifier=".cg"
            )
            lsum = tl.load(
                Part + slots * (HEAD_DIM + 1) + slot, mask=ok, other=0.0, cache_modifier=".cg"
            )
            m_max = tl.max(m, 0)
            # a row that saw no key (or a padding row) keeps -inf: its weights are 0, not NaN
            m_max = tl.where(m_max == float("-inf"), 0.0, m_max)
            l_sum = tl.sum(lsum * tl.exp(m - m_max[None, :]), 0)
            acc = tl.zeros([ROWS, HEAD_DIM], dtype=tl.float32)
            for first in tl.static_range(0, BLOCK_S, CHUNK):  # CHUNK splits, every row at once
                part = first + tl.arange(0, CHUNK)
                ok = (part < NUM_SPLITS)[:, None] & real[None, :]
                slot = (bh * NUM_SPLITS + part)[:, None] * BLOCK_M + rows[None, :]
                # the chunk's maxima again: a second load costs less than slicing the weights
                m = tl.load(
                    Part + slots * HEAD_DIM + slot, mask=ok, other=float("-inf"),
                    cache_modifier=".cg",
                )  # fmt: skip
                o = tl.load(
                    Part + slot[:, :, None].to(tl.int64) * HEAD_DIM + offs_d[None, None, :],
                    mask=ok[:, :, None], other=0.0, cache_modifier=".cg",
                )  # fmt: skip
                acc += tl.sum(o * tl.exp(m - m_max[None, :])[:, :, None], 0)
            out = acc / tl.where(real, l_sum, 1.0)[:, None]
            o_ptrs = (
                Out
                + b.to(tl.int64) * stride_ob
                + (kvh * GROUP + rows // N_Q)[:, None].to(tl.int64) * stride_oh
                + (rows % N_Q)[:, None] * stride_om
                + offs_d[None, :] * stride_od
            )
            tl.store(o_ptrs, out.to(Out.dtype.element_ty), mask=real[:, None])


def last_tiles(rows: int, dim: int, num_splits: int) -> dict:
    """combine_last's tile sizes: ROWS, the real rows rounded up to a power of two (at least
    2); BLOCK_S, the splits likewise; CHUNK, the splits one unrolled step combines, CHUNK x
    ROWS x dim values at most CHUNK_VALUES (at least 2, at most BLOCK_S)."""
    rows_p2 = max(2, triton.next_power_of_2(rows))
    block_s = max(2, triton.next_power_of_2(num_splits))
    chunk = max(2, min(CHUNK_VALUES // (rows_p2 * dim), block_s))
    return {"ROWS": rows_p2, "CHUNK": 1 << (chunk.bit_length() - 1), "BLOCK_S": block_s}


def pdl_ok(device) -> bool:
    """Whether combine_kernel may be a programmatic dependent launch on `device`: a Hopper or
    later GPU, and a Triton that has grid dependency control."""
    if gdc_wait is None or device.type != "cuda" or INTERPRET:
        return False
    return torch.cuda.get_device_capability(device)[0] >= 9


# device -> int32 arrival counters, one per (batch, K/V head) of the largest grid launched yet
_COUNTERS: dict = {}


def counters(device, programs: int) -> torch.Tensor:
    """At least `programs` arrival counters on `device`, all 0 (as every call leaves them)."""
    found = _COUNTERS.get(device)
    if found is None or found.numel() < programs:
        # a larger one replaces it; launches remembered with the smaller one keep it alive
        found = torch.zeros(max(programs, 64), dtype=torch.int32, device=device)
        _COUNTERS[device] = found
    return found
