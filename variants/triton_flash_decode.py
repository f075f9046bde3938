"""triton-flash at decode shapes: a few queries over a long key cache, split over the keys
(flash-decoding).

At decode, q is [B, H, Q, D] with Q small (1 for a token, a few for speculative decoding) and
k, v are [B, H_kv, K, D] with K the cache's length. One program per (batch, K/V head) would
leave most of the GPU idle, and one per query head would read each K/V head GROUP times. So
the first kernel gives each program one K/V head, every query of every query head that shares
it (GROUP x Q rows: K/V read once for the group), and one split of the keys, and writes its
partial softmax (row max, row sum, unnormalised output) in float32, into one buffer (one
allocation per call: at batch 1 the host's per-call work is what a call costs); the splits
of each row are then combined (variants/flash_decode_combine.py): eagerly by the last program
of each (batch, K/V head) to finish, one launch in all, where that program combines in one
step (few splits: batched shapes); else, and under torch.compile, by a second kernel. Causal
is bottom-right: the queries are the last Q positions of the keys, so query i sees keys up to
K - Q + i (a single query sees every key). Given per-row key counts (kv_lens, a model's static
cache filled up to its position), row b's keys end at kv_lens[b]: the queries are the last Q
positions of those, and the rest of the cache is never read.

The tiles (keys per step, warps, pipeline stages) are autotuned per bucket of split length and
row count; eagerly, a shape's later calls launch the tuned kernels straight (variants/launch.py),
since at batch 1 the host's launch costs more than the GPU's work.

triton_flash.flash_attention sends q and k of different lengths here.
"""

import math

import torch

from compilekit.model.errors import Unsupported
from compilekit.variants.flash_decode_combine import (
    combine_kernel,
    combine_last,
    counters,
    gdc_launch_dependents,
    last_tiles,
    pdl_ok,
)
from compilekit.variants.launch import (
    INTERPRET,
    LaunchCache,
    autotune_key,
    direct_launcher,
    eager_winner,
    outside_compile,
    tensor_key,
)

try:
    import triton
    import triton.language as tl
except ImportError:  # CPU builds of torch come without triton
    triton = None

MAX_ROWS = 128  # GROUP x Q rows per program: its accumulator is MAX_ROWS x D in registers
MIN_SPLIT = 256  # keys per split at least: a shorter split costs more to combine than it saves
SPLIT_ALIGN = 128  # a split starts on a multiple of the largest tile: every tile's loads align
MAX_SPLITS = 128  # the combine reads every split's partials of a row at once
PROGRAMS_PER_SM = 4  # enough programs in flight to keep the memory system busy
OP_NAME = "compilekit::flash_decode"


def _configs():
    if INTERPRET:  # every config would be interpreted in numpy: one
        return [triton.Config({"BLOCK_N": 64}, num_warps=1, num_stages=1)]
    # the loop only streams K and V: long tiles and deep pipelines keep loads in flight
    return [
        triton.Config({"BLOCK_N": n}, num_warps=w, num_stages=st)
        for n, w, st in [
            (64, 4, 2), (64, 4, 3), (64, 4, 4), (128, 4, 2), (128, 4, 3), (128, 8, 2),
            (128, 8, 3), (32, 4, 4),
        ]
    ]  # fmt: skip


# tuning key -> the split kernel's config this process's eager autotuning chose: torch.compile's
# own autotuning (Inductor times the configs again, apart) is then given that one config, so
# compiled and eager run the same kernel (as variants/triton_flash.py does)
_TUNED: dict = {}
_TUNING_KEY = ("SPLIT_BUCKET", "BLOCK_M", "HEAD_DIM")


def tuning_key(named_args: dict, kwargs: dict) -> tuple:
    """What the autotuner keys on, from a launch's arguments."""
    return autotune_key(_TUNING_KEY, named_args, kwargs)


def _known(configs, named_args, **kwargs):
    """Every config, or only the one eager autotuning chose for this key (_TUNED)."""
    return eager_winner(_TUNED, tuning_key, configs, named_args, kwargs)


if triton is not None:

    @triton.autotune(
        configs=_configs(), key=list(_TUNING_KEY), prune_configs_by={"early_config_prune": _known}
    )
    @triton.jit
    def _split_kernel(
        Q, K, V, Part, KV_LENS, Out, Counter,
        stride_qb, stride_qh, stride_qm, stride_qd,
        stride_kb, stride_kh, stride_kn, stride_kd,
        stride_vb, stride_vh, stride_vn, stride_vd,
        stride_ob, stride_oh, stride_om, stride_od,
        KV_HEADS, GROUP, N_Q, N_KV, SPLIT_LEN, NUM_SPLITS,
        SPLIT_BUCKET,  # SPLIT_LEN rounded up to a power of two: the autotuner keys on it
        SM_SCALE: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr,
        BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr, HAS_LENS: tl.constexpr,
        ONE_SPLIT: tl.constexpr, FUSED: tl.constexpr, ROWS: tl.constexpr, CHUNK: tl.constexpr,
        BLOCK_S: tl.constexpr, PDL: tl.constexpr,
    ):  # fmt: skip
        if PDL:  # the combine kernel may start now: its programs wait for this kernel's end
            gdc_launch_dependents()
        bh = tl.program_id(0)  # batch * KV_HEADS + K/V head
        split = tl.program_id(1)
        b = bh // KV_HEADS
        kvh = bh % KV_HEADS
        rows = tl.arange(0, BLOCK_M)  # row r: query head kvh * GROUP + r // N_Q, query r % N_Q
        head = kvh * GROUP + rows // N_Q
        query = rows % N_Q
        real = rows < GROUP * N_Q
        offs_d = tl.arange(0, HEAD_DIM)
        q_ptrs = (
            Q
            + b.to(tl.int64) * stride_qb
            + head[:, None].to(tl.int64) * stride_qh
            + query[:, None] * stride_qm
            + offs_d[None, :] * stride_qd
        )
        q = tl.load(q_ptrs, mask=real[:, None], other=0.0)
        k_base = K + b.to(tl.int64) * stride_kb + kvh.to(tl.int64) * stride_kh
        v_base = V + b.to(tl.int64) * stride_vb + kvh.to(tl.int64) * stride_vh
        m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
        l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
        acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
        n_kv = N_KV
        if HAS_LENS:  # this row's cache holds fewer keys: the splits past them read nothing
            n_kv = tl.load(KV_LENS + b)
        start = split * SPLIT_LEN
        end = tl.minimum(start + SPLIT_LEN, n_kv)
        last_key = n_kv - N_Q + query  # the last key each row may see
        for n in range(start, end, BLOCK_N):
            offs_n = n + tl.arange(0, BLOCK_N)
            in_split = offs_n < end
            # [BLOCK_N, D] as K lies in memory (D contiguous): coalesced, pipelined loads
            k = tl.load(
                k_base + offs_n[:, None] * stride_kn + offs_d[None, :] * stride_kd,
                mask=in_split[:, None],
                other=0.0,
            )
            s = tl.dot(q, tl.trans(k)) * SM_SCALE
            keep = in_split[None, :] & real[:, None]
            if CAUSAL:
                keep = keep & (offs_n[None, :] <= last_key[:, None])
            s = tl.where(keep, s, float("-inf"))
            m_new = tl.maximum(m_i, tl.max(s, 1))
            # a row with no key yet seen keeps -inf: exponents taken against 0 stay 0, not NaN
            m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
            p = tl.exp(s - m_safe[:, None])
            alpha = tl.exp(m_i - m_safe)
            l_i = l_i * alpha + tl.sum(p, 1)
            v = tl.load(
                v_base + offs_n[:, None] * stride_vn + offs_d[None, :] * stride_vd,
                mask=in_split[:, None],
                other=0.0,
            )
            acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
            m_i = m_new
        if ONE_SPLIT:  # the whole row is here: normalise and write it, no combine to launch
            o = acc / tl.where(real, l_i, 1.0)[:, None]
            o_ptrs = (
                Out
                + b.to(tl.int64) * stride_ob
                + head[:, None].to(tl.int64) * stride_oh
                + query[:, None] * stride_om
                + offs_d[None, :] * stride_od
            )
            tl.store(o_ptrs, o.to(Out.dtype.element_ty), mask=real[:, None])
        else:
            # Part holds the partial outputs, then the row maxima, then the row sums: each
            # (batch, K/V head) row of the grid has NUM_SPLITS x BLOCK_M slots. (Written out
            # here, not in a helper: Inductor reads a kernel's stores to an argument from its
            # Triton IR, and plain pointer arithmetic is what it follows surely.)
            # Only the real rows are written (the combine reads no other): at GQA 32/8 and one
            # query, 4 of the tile's 16 rows, and the partials' traffic is a quarter.
            slots = tl.num_programs(0).to(tl.int64) * NUM_SPLITS * BLOCK_M
            slot = (bh * NUM_SPLITS + split) * BLOCK_M + rows
            tl.store(Part + slots * HEAD_DIM + slot, m_i, mask=real)
            tl.store(Part + slots * (HEAD_DIM + 1) + slot, l_i, mask=real)
            tl.store(
                Part + slot[:, None].to(tl.int64) * HEAD_DIM + offs_d[None, :],
                acc,
                mask=real[:, None],
            )
            if FUSED:  # the last program of this (batch, K/V head) combines: one launch
                combine_last(
                    Part, Out, Counter, bh, b, kvh, slots,
                    stride_ob, stride_oh, stride_om, stride_od, GROUP, N_Q, NUM_SPLITS,
                    HEAD_DIM, BLOCK_M, ROWS, CHUNK, BLOCK_S,
                )  # fmt: skip


def check(q, k) -> None:
    """Refuse (Unsupported) what the split kernel does not take."""
    rows = (q.shape[1] // k.shape[1]) * q.shape[2]
    if rows > MAX_ROWS:
        raise Unsupported(
            f"triton-flash over a longer cache takes at most {MAX_ROWS} query rows per K/V "
            f"head (query heads per K/V head x queries); got {rows}: fewer queries, or "
            "queries and keys of one length"
        )


def splits_for(programs: int, keys: int, device) -> int:
    """How many splits of the keys: enough for PROGRAMS_PER_SM programs per SM, each split at
    least MIN_SPLIT keys, at most MAX_SPLITS (on the interpreter, two per program: the combine
    is exercised)."""
    if device.type != "cuda":
        return min(2, triton.cdiv(keys, 64))
    sms = torch.cuda.get_device_properties(device).multi_processor_count
    wanted = math.ceil(PROGRAMS_PER_SM * sms / programs)
    return max(1, min(wanted, keys // MIN_SPLIT, MAX_SPLITS))


def plan(q, k) -> dict:
    """The launch's sizes for q over k: rows per program, splits and their length."""
    batch, heads, queries, _ = q.shape
    kv_heads, keys = k.shape[1], k.shape[2]
    group = heads // kv_heads
    num_splits = splits_for(batch * kv_heads, keys, q.device)
    align = 64 if INTERPRET else SPLIT_ALIGN
    split_len = triton.cdiv(triton.cdiv(keys, num_splits), align) * align
    return dict(
        group=group,
        block_m=max(16, triton.next_power_of_2(group * queries)),
        split_len=split_len,
        num_splits=triton.cdiv(keys, split_len),
    )


def launch(q, k, v, causal: bool, wrap=None, kv_lens=None, fused=None, pdl=False):
    """out [B, H, Q, D] for q [B, H, Q, D] over k, v [B, H_kv, K, D]; wrap: torch.library's
    wrap_triton under torch.compile (None eagerly: the shape's later calls then launch the
    tuned kernels straight, launch_known); kv_lens: int32 [B], the keys each row holds. One
    split (a short cache) writes the output itself. More are combined eagerly by the split
    kernel's last program of each (batch, K/V head) (fused; combine_last) where that program
    combines them in one step of loads (a batch's worth of (batch, K/V head) rows, few splits
    each); else, and always under torch.compile, by a second kernel (combine_kernel: at batch
    1 one program combining 32 splits serially costs more than the second launch, and under
    torch.compile Inductor sees what each kernel reads and writes, where the arrival counters
    would be state outside its graph). fused=True or False asks for one way; pdl=True asks
    for the second kernel as a programmatic dependent launch, eagerly on Hopper
    (flash_decode_combine.pdl_ok). Either is for comparison: that launch is not kept for
    launch_known."""
    batch, heads, queries, dim = q.shape
    kv_heads, keys = k.shape[1], k.shape[2]
    p = plan(q, k)
    block_m, num_splits = p["block_m"], p["num_splits"]
    out = torch.empty_like(q)
    one = num_splits == 1
    # the eager path as it runs
    remember = wrap is None and fused is None and not pdl and not INTERPRET
    tiles = last_tiles(p["group"] * queries, dim, num_splits)
    if fused is None:  # eagerly, one launch where the last program combines in one step
        fused = wrap is None and tiles["CHUNK"] == tiles["BLOCK_S"]
    fused = fused and not one
    pdl = pdl and wrap is None and not one and not fused and pdl_ok(q.device)
    part = _partials(q, batch * kv_heads * num_splits * block_m, one, k)
    split_kernel = wrap(_split_kernel) if wrap else _split_kernel
    split_grid = (batch * kv_heads, num_splits, 1)
    split_args = (
        q, k, v, part, k if kv_lens is None else kv_lens, out,
        counters(q.device, batch * kv_heads) if fused else k,
        *q.stride(), *k.stride(), *v.stride(), *out.stride(),
        kv_heads, p["group"], queries, keys, p["split_len"], num_splits,
        triton.next_power_of_2(p["split_len"]),
    )  # fmt: skip
    split_consts = dict(
        SM_SCALE=1.0 / math.sqrt(dim), HEAD_DIM=dim, BLOCK_M=block_m, CAUSAL=causal,
        HAS_LENS=kv_lens is not None, ONE_SPLIT=one, FUSED=fused, PDL=pdl,
        **tiles,
    )  # fmt: skip
    split = split_kernel[split_grid[:2]](*split_args, **split_consts)
    combine = None
    if not one and not fused:
        kernel = wrap(combine_kernel) if wrap else combine_kernel
        combine_grid = (batch * kv_heads, p["group"] * queries, 1)
        combine_args = (
            part, out, *out.stride(), kv_heads, p["group"], queries, num_splits,
        )  # fmt: skip
        combine_consts = dict(
            HEAD_DIM=dim, BLOCK_M=block_m, BLOCK_S=tiles["BLOCK_S"], PDL=pdl,
        )  # fmt: skip
        launch_pdl = {"launch_pdl": True} if pdl else {}  # a launch option, not an argument
        compiled = kernel[combine_grid[:2]](*combine_args, **combine_consts, **launch_pdl)
        combine = (compiled, combine_grid, combine_args, combine_consts)
    if remember:
        _remember(q, k, v, causal, kv_lens, (split, split_grid, split_args, split_consts), combine)
    return out


launch_interpreted = outside_compile(launch)


def _partials(q, slots: int, one: bool, stand_in):
    """The splits' float32 partials in one buffer (output, then row max, then row sum, as the
    kernels read it); with one split none are written, and `stand_in` (k: an input, never
    written) takes its place, as it takes the lengths' place without them: under torch.compile
    no stand-in aliases the output, which would cost Inductor a copy of it."""
    if one:
        return stand_in
    return torch.empty(slots * (q.shape[-1] + 2), dtype=torch.float32, device=q.device)


# launch key -> what launch_known needs to launch both kernels straight: the eager path's
# later calls at a shape skip the autotuner's dispatch and Triton's argument binding, which
# cost more host time than the GPU spends at batch 1
_FAST_LAUNCH = LaunchCache()


def launch_key(q, k, v, causal: bool, kv_lens=None) -> tuple:
    """What the compiled kernels specialize on (tensor_key), and the mask."""
    lens = () if kv_lens is None else tensor_key(kv_lens)
    return (*tensor_key(q, k, v), causal, lens)


def _tail(kernel, args: tuple, consts: dict, first: int) -> tuple:
    """The arguments after the first `first` (the tensors made per call), constexprs included,
    in the signature's order, as a compiled kernel's runner takes them."""
    names = getattr(kernel, "arg_names", None) or kernel.fn.arg_names  # an autotuner wraps one
    values = dict(consts)
    if hasattr(kernel, "best_config"):
        values.update(kernel.best_config.kwargs)
    return args[first:] + tuple(values[n] for n in names[len(args) :])


def _remember(q, k, v, causal, kv_lens, split, combine) -> None:
    compiled_split, grid_s, args_s, consts_s = split
    _TUNED[tuning_key(dict(zip(_split_kernel.fn.arg_names, args_s)), consts_s)] = (
        _split_kernel.best_config
    )
    compiled = (compiled_split,) + (() if combine is None else (combine[0],))
    if not all(hasattr(c, "run") and hasattr(c, "__getitem__") for c in compiled):
        return  # a Triton whose launch returns no compiled kernel: the slow path stays
    run_combine = None
    if combine is not None:
        compiled_combine, grid_c, args_c, consts_c = combine
        run_combine = (
            direct_launcher(compiled_combine, grid_c),
            _tail(combine_kernel, args_c, consts_c, 2),
        )
    one, fused = consts_s["ONE_SPLIT"], consts_s["FUSED"]
    slots = 0 if one else args_s[3].numel() // (q.shape[-1] + 2)
    _FAST_LAUNCH.remember(
        launch_key(q, k, v, causal, kv_lens),
        (
            slots,
            args_s[6] if fused else None,  # the counters; else a stand-in, the call's k
            direct_launcher(compiled_split, grid_s),
            _tail(_split_kernel, args_s, consts_s, 7),
            run_combine,
        ),
    )


def launch_known(q, k, v, causal: bool, kv_lens=None):
    """The eager fast path: the output, the kernels launched straight with what the shape's
    first launch kept; None where none was kept yet (then `launch`)."""
    known = _FAST_LAUNCH.get(launch_key(q, k, v, causal, kv_lens))
    if known is None:
        return None
    slots, counter, run_split, split_tail, run_combine = known
    out = torch.empty_like(q)
    part = _partials(q, slots, slots == 0, k)
    lens = k if kv_lens is None else kv_lens
    run_split(q, k, v, part, lens, out, k if counter is None else counter, *split_tail)
    if run_combine is not None:
        launcher, tail = run_combine
        launcher(part, out, *tail)
    return out


if triton is not None and hasattr(torch.library, "triton_op"):

    @torch.library.triton_op(OP_NAME, mutates_args=())
    def decode_op(
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        causal: bool,
        kv_lens: torch.Tensor | None = None,
    ) -> torch.Tensor:
        # wrap_triton: Inductor sees both kernels (never fused: launch's docstring says why)
        # and keeps them in its graph and CUDA graphs
        return launch(q, k, v, causal, torch.library.wrap_triton, kv_lens)
else:  # torch < 2.6: no triton_op; eager only

    def decode_op(q, k, v, causal, kv_lens=None):
        return launch(q, k, v, causal, kv_lens=kv_lens)
