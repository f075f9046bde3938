"""The blog's last step, written here: causal flash attention forward in Triton.

Kernel, reference and the torch op it is exposed as, in that order (the shape of Triton's
06-fused-attention.py). One program computes BLOCK_M query rows of one (batch, head) against
every key block it may see, keeping a running max and sum (online softmax), so the S x S scores
never reach memory. Supports causal and non-causal, GQA (K/V heads dividing Q heads), a causal
sliding window, any sequence length (tail blocks masked) and head dims that are powers of two.

Without a GPU it runs through Triton's interpreter when TRITON_INTERPRET=1 is set before import.
FLOPs: variants.masks.attention_flops (causal: 4·B·H·D·S(S+1)/2).
"""

import math
import threading

import torch
from torch.autograd import profiler as _autograd_profiler

from compilekit.model.errors import Unsupported
from compilekit.variants.launch import (
    INTERPRET,
    LaunchCache,
    autotune_key,
    direct_launcher,
    eager_winner,
    l2_group_heads,
    outside_compile,
    tensor_key,
)
from compilekit.variants.masks import causal_flops as flops  # noqa: F401  (FLOPs this variant does)
from compilekit.variants.masks import (
    check_shapes,
    reference,  # noqa: F401  (the variant's float64 truth)
)

DESCRIPTION = "hand-written Triton flash attention (online softmax, causal, GQA, sliding window)"

try:
    import triton
    import triton.language as tl
except ImportError:  # CPU builds of torch come without triton
    triton = None


def _configs():
    if INTERPRET:  # every config would be interpreted in numpy: one small one
        return [
            triton.Config({"BLOCK_M": 16, "BLOCK_N": 16, "TMA": False}, num_warps=1, num_stages=1)
        ]
    # Hopper: 128-row query tiles keep the wgmma units fed (FlexAttention's defaults: 128x128,
    # 3 stages, 4 warps at D=64; 128x64, 3 stages, 8 warps at D=128); more stages hide the K/V
    # loads; small tiles for D=256 and for short sequences.
    plain = [
        (128, 128, 4, 3, False),
        (128, 128, 8, 3, False),
        (128, 64, 4, 3, False),
        (128, 64, 8, 3, False),
        (128, 32, 4, 4, False),
        (64, 64, 4, 3, False),
        (64, 32, 4, 2, False),
    ]
    # K and V through the tensor memory accelerator (sm90+): the copy engine moves the tiles,
    # the warps spend no registers or instructions on addresses (Triton PR #4552: 368 -> 427
    # TFLOP/s at D=128). The tiles that won on the H200 without it (experiments/results/h200/
    # triton_flash_bench/configs.txt); the autotuner keeps whichever is faster.
    tma = [(128, 128, 8, 3, True), (128, 64, 8, 3, True), (64, 64, 4, 3, True)]
    return [
        triton.Config({"BLOCK_M": m, "BLOCK_N": n, "TMA": t}, num_warps=w, num_stages=st)
        for m, n, w, st, t in plain + tma
    ]


SHARED_MEMORY_BYTES = 227 * 1024  # per block on the H100/H200


# tuning key -> the config this process's eager autotuning chose for it: torch.compile's own
# autotuning of the kernel (Inductor times the configs again, apart) is then given that one
# config, so compiled and eager run the same kernel, and a key is tuned once per process
_TUNED: dict = {}


_TUNING_KEY = ("S_BUCKET", "HEAD_DIM", "CAUSAL", "WINDOW", "TMA_OK")  # the autotuner's key


def tuning_key(named_args: dict, kwargs: dict) -> tuple:
    """What the autotuner keys on, from a launch's arguments."""
    return autotune_key(_TUNING_KEY, named_args, kwargs)


def tma_where_ok(configs, named_args, **kwargs):
    """The configs, less those that load through TMA where the launch says TMA cannot read K
    and V (its TMA_OK: tma_ok); an autotuner's early_config_prune."""
    ok = kwargs.get("TMA_OK", named_args.get("TMA_OK", False))
    return [c for c in configs if ok or not c.kwargs.get("TMA")]


def _fits(configs, named_args, **kwargs):
    """Drop tiles whose pipelined K/V buffers and query tile overflow shared memory (they would
    only fail to compile, one by one, while autotuning), and the TMA configs where the launch
    says TMA cannot read K and V (TMA_OK). Where this key was tuned already (_TUNED), only the
    config that won."""
    dim = kwargs.get("HEAD_DIM") or named_args.get("HEAD_DIM") or 64
    size = named_args["Q"].element_size()

    def smem(c):
        kv = c.num_stages * 2 * c.kwargs["BLOCK_N"] * dim * size
        return kv + c.kwargs["BLOCK_M"] * dim * size

    usable = tma_where_ok(configs, named_args, **kwargs)
    fitting = [c for c in usable if smem(c) <= SHARED_MEMORY_BYTES] or usable[-1:]
    return eager_winner(_TUNED, tuning_key, fitting, named_args, kwargs)


def tma_ok(q, k, v) -> bool:
    """Whether TMA can load K and V as the kernel asks (per (batch, head), rows of HEAD_DIM):
    a Hopper or later GPU (or the interpreter), unit stride along D, and every other stride and
    the base offset a multiple of 16 bytes. Reads strides and storage offsets only, which
    torch.compile's fake tensors have too (torch's allocations are 256-byte aligned)."""
    if q.device.type == "cuda":
        if _capability(q.device) < 9:
            return False
    elif not INTERPRET:
        return False
    for t in (k, v):
        size = t.element_size()
        if t.stride(-1) != 1 or (t.shape[-1] * size) % 16:
            return False
        if any((x * size) % 16 for x in (*t.stride()[:-1], t.storage_offset())):
            return False
    return True


_CAPABILITY: dict = {}


def _capability(device) -> int:
    """The device's compute capability major (0 where CUDA is not there: a fake CUDA tensor
    traced on a machine without a GPU)."""
    if not torch.cuda.is_available():
        return 0
    index = device.index if device.index is not None else torch.cuda.current_device()
    if index not in _CAPABILITY:
        _CAPABILITY[index] = torch.cuda.get_device_capability(index)[0]
    return _CAPABILITY[index]


if triton is not None:

    @triton.jit
    def _attn_blocks(
        acc,
        l_i,
        m_i,
        q,
        k_base,
        v_base,
        stride_kn,
        stride_kk,
        stride_vn,
        stride_vk,
        offs_m,
        offs_n,
        offs_d,
        lo,
        hi,
        N_CTX,
        qk_scale,
        MASKED: tl.constexpr,
        CAUSAL: tl.constexpr,
        WINDOW: tl.constexpr,
        BLOCK_N: tl.constexpr,
        TMA: tl.constexpr,
    ):
        """Key blocks [lo, hi) folded into the running softmax state (acc, l_i, m_i).

        MASKED=False is the hot loop: every key there is in range and visible to every query
        row of the tile, so it skips the bounds loads, the compare, the select and the guard
        for fully masked rows (softmax ALU work is what Hopper runs out of first).
        TMA: k_base and v_base are tensor descriptors of this head's [N_CTX, HEAD_DIM] rows;
        the copy engine fills rows past N_CTX with zeros, so no load needs a mask.
        """
        for start_n in range(lo, hi, BLOCK_N):
            cols = start_n + offs_n
            if TMA:
                k = k_base.load([start_n, 0]).T
            else:
                k_ptrs = k_base + cols[None, :] * stride_kn + offs_d[:, None] * stride_kk
                v_ptrs = v_base + cols[:, None] * stride_vn + offs_d[None, :] * stride_vk
            if MASKED:
                if not TMA:
                    k = tl.load(k_ptrs, mask=cols[None, :] < N_CTX, other=0.0)
                keep = cols[None, :] < N_CTX
                if CAUSAL:
                    keep = keep & (offs_m[:, None] >= cols[None, :])
                if WINDOW > 0:
                    keep = keep & (offs_m[:, None] - cols[None, :] < WINDOW)
                qk = tl.where(keep, tl.dot(q, k), float("-inf"))
                m_new = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
                m_exp = tl.where(m_new == float("-inf"), 0.0, m_new)  # fully masked rows stay 0
            else:
                if not TMA:
                    k = tl.load(k_ptrs)
                qk = tl.dot(q, k)
                m_new = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
                m_exp = m_new  # every row saw a key: the max is finite
            # -- online softmax: rescale what came before to the new running max. The scale is
            # applied after the row max (it is positive, so the max is the same key), and then
            # with the subtraction as one fused multiply-add per score, not a multiply and a
            # subtract: the softmax's ALU work is what Hopper runs out of first --
            p = tl.math.exp2(qk * qk_scale - m_exp[:, None])
            alpha = tl.math.exp2(m_i - m_exp)
            l_i = l_i * alpha + tl.sum(p, 1)
            if TMA:
                v = v_base.load([start_n, 0])
            elif MASKED:
                v = tl.load(v_ptrs, mask=cols[:, None] < N_CTX, other=0.0)
            else:
                v = tl.load(v_ptrs)
            # the rescaled accumulator goes into the MMA as its addend (wgmma accumulates)
            acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
            m_i = m_new
        return acc, l_i, m_i

    @triton.jit
    def _tile_of(pid, BH, n_m, L2_HEADS, CAUSAL: tl.constexpr):
        """(B*H row, query block) of the program launched pid-th: rows in groups of L2_HEADS
        (their K and V fit in L2), all query blocks of a group before the next group's, the
        group's rows varying fastest; under a causal mask the query blocks last-first, so the
        heaviest tiles (most keys) start first and light ones fill the tail (longest-processing-
        time order). L2_HEADS >= B*H: heads fastest across the whole grid."""
        first = pid // (L2_HEADS * n_m) * L2_HEADS
        size = tl.minimum(L2_HEADS, BH - first)
        r = pid - first * n_m
        block = r // size
        if CAUSAL:
            block = n_m - 1 - block
        return first + r % size, block

    @triton.autotune(
        configs=_configs(),
        key=list(_TUNING_KEY),
        prune_configs_by={"early_config_prune": _fits},
    )
    @triton.jit
    def _attn_fwd(
        Q,
        K,
        V,
        Out,
        stride_qz,
        stride_qh,
        stride_qm,
        stride_qk,
        stride_kz,
        stride_kh,
        stride_kn,
        stride_kk,
        stride_vz,
        stride_vh,
        stride_vn,
        stride_vk,
        stride_oz,
        stride_oh,
        stride_om,
        stride_ok,
        H,
        KV_GROUP,
        N_CTX,
        S_BUCKET,  # N_CTX rounded up to a power of two: the autotuner keys on it, not on N_CTX
        L2_HEADS,  # launch.l2_group_heads: the (batch, head) rows run together
        HEAD_DIM: tl.constexpr,
        # constexpr: Inductor passes Python float kernel arguments as fp64 (eager Triton as
        # fp32), which would make the loop-carried m_i change type under torch.compile
        SM_SCALE: tl.constexpr,
        CAUSAL: tl.constexpr,
        WINDOW: tl.constexpr,
        TMA_OK: tl.constexpr,  # tma_ok(q, k, v): whether the TMA configs may run at all
        BLOCK_M: tl.constexpr,
        BLOCK_N: tl.constexpr,
        TMA: tl.constexpr,  # the config's: K and V through tensor descriptors
    ):
        off_hz, start_m = _tile_of(
            tl.program_id(1) * tl.num_programs(0) + tl.program_id(0),
            tl.num_programs(0),
            tl.num_programs(1),
            L2_HEADS,
            CAUSAL,
        )
        off_z = off_hz // H
        off_h = off_hz % H
        off_kvh = off_h // KV_GROUP  # GQA: KV_GROUP query heads share one K/V head

        offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
        offs_n = tl.arange(0, BLOCK_N)
        offs_d = tl.arange(0, HEAD_DIM)
        q_ptrs = (
            Q
            + off_z.to(tl.int64) * stride_qz
            + off_h.to(tl.int64) * stride_qh
            + offs_m[:, None] * stride_qm
            + offs_d[None, :] * stride_qk
        )
        k_base = K + off_z.to(tl.int64) * stride_kz + off_kvh.to(tl.int64) * stride_kh
        v_base = V + off_z.to(tl.int64) * stride_vz + off_kvh.to(tl.int64) * stride_vh
        if TMA:  # this head's rows, built on the device (no host descriptors to autotune)
            k_base = tl.make_tensor_descriptor(
                k_base, [N_CTX, HEAD_DIM], [stride_kn, 1], [BLOCK_N, HEAD_DIM]
            )
            v_base = tl.make_tensor_descriptor(
                v_base, [N_CTX, HEAD_DIM], [stride_vn, 1], [BLOCK_N, HEAD_DIM]
            )

        # -- load the query tile once; rows past the end are zeros and never stored --
        q = tl.load(q_ptrs, mask=offs_m[:, None] < N_CTX, other=0.0)
        m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
        l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
        acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
        qk_scale = SM_SCALE * 1.44269504  # exp(x) = exp2(x * log2(e))

        # -- the key blocks this query tile can see, in two loops: the blocks every row of the
        # tile sees whole (no mask), then the diagonal or tail blocks (masked) --
        if WINDOW > 0:  # the window's edge crosses most blocks it touches: one masked loop
            lo = tl.maximum(start_m * BLOCK_M - WINDOW + 1, 0) // BLOCK_N * BLOCK_N
            full_hi = lo
        elif CAUSAL:
            lo = 0
            full_hi = start_m * BLOCK_M // BLOCK_N * BLOCK_N  # keys left of the tile's first row
        else:
            lo = 0
            full_hi = N_CTX // BLOCK_N * BLOCK_N
        hi = N_CTX
        if CAUSAL:
            hi = tl.minimum((start_m + 1) * BLOCK_M, N_CTX)
        acc, l_i, m_i = _attn_blocks(
            acc,
            l_i,
            m_i,
            q,
            k_base,
            v_base,
            stride_kn,
            stride_kk,
            stride_vn,
            stride_vk,
            offs_m,
            offs_n,
            offs_d,
            lo,
            full_hi,
            N_CTX,
            qk_scale,
            False,
            CAUSAL,
            WINDOW,
            BLOCK_N,
            TMA,
        )
        acc, l_i, m_i = _attn_blocks(
            acc,
            l_i,
            m_i,
            q,
            k_base,
            v_base,
            stride_kn,
            stride_kk,
            stride_vn,
            stride_vk,
            offs_m,
            offs_n,
            offs_d,
            full_hi,
            hi,
            N_CTX,
            qk_scale,
            True,
            CAUSAL,
            WINDOW,
            BLOCK_N,
            TMA,
        )

        # -- normalise and store the rows that exist --
        acc = acc / tl.where(l_i == 0.0, 1.0, l_i)[:, None]
        o_ptrs = (
            Out
            + off_z.to(tl.int64) * stride_oz
            + off_h.to(tl.int64) * stride_oh
            + offs_m[:, None] * stride_om
            + offs_d[None, :] * stride_ok
        )
        tl.store(o_ptrs, acc.to(Out.dtype.element_ty), mask=offs_m[:, None] < N_CTX)


def check_runtime(name: str, device) -> None:
    """Refuse (Unsupported, naming the kernel) a device no Triton kernel here runs on: no
    Triton, or a CPU without Triton's interpreter."""
    if triton is None:
        raise Unsupported(
            f"{name} needs Triton: a CUDA build of torch, or "
            "`pip install triton numpy` with TRITON_INTERPRET=1 on a CPU"
        )
    if device.type != "cuda" and not INTERPRET:
        raise Unsupported(
            f"{name} needs a CUDA GPU, or Triton's interpreter on the CPU "
            "(set TRITON_INTERPRET=1 before starting)"
        )


def check_head(name: str, q) -> None:
    """Refuse a head dim that is not a power of two in 16..256, and bfloat16 on the
    interpreter (which computes it wrongly)."""
    dim = q.shape[-1]
    if dim < 16 or dim > 256 or dim & (dim - 1):
        raise Unsupported(f"{name} supports head dims 16..256 that are powers of two, not {dim}")
    if INTERPRET and q.dtype == torch.bfloat16:
        raise Unsupported(
            "Triton's interpreter computes bfloat16 wrongly (numpy has no "
            "bfloat16): use float16 or float32 with TRITON_INTERPRET=1"
        )


def check_inputs(q, k, v, causal: bool, window: int) -> None:
    """Refuse what the kernel does not compute, with the reason (never a wrong answer): an
    Unsupported error, which a cell records as `unsupported`."""
    check_runtime("triton-flash", q.device)
    check_shapes("triton-flash", q, k, v)
    if not q.device == k.device == v.device:
        raise Unsupported(
            f"triton-flash wants q, k and v on one device; got {q.device}, {k.device}, {v.device}"
        )
    if window and not causal:
        raise Unsupported("a sliding window is a causal window here: pass causal=True")
    check_head("triton-flash", q)


# launch key -> (the compiled kernel's runner for its grid, the constexpr values after the
# runtime arguments): the eager path's second and later calls with the same key skip the
# autotuner's dispatch and Triton's argument binding, which cost more host time than the kernel
# takes at small shapes (57-84 us per call on the H200 without it)
_FAST_LAUNCH = LaunchCache()
_AUTOTUNE_LOCK = threading.Lock()
OP_NAME = "compilekit::flash_attention"  # the custom op; the eager launch's name in a profile


def launch_key(q, k, v, out, causal: bool, window: int) -> tuple:
    """Everything Triton specializes a compiled kernel on for these arguments (tensor_key), and
    everything check_inputs reads, since a known key skips it. Equal keys may share one
    compiled kernel and grid."""
    return (*tensor_key(q, k, v, out), causal, window)


def _remember_launch(key, compiled, args: tuple, consts: dict, grid: tuple) -> None:
    """Keep the autotuned call's compiled kernel for its key: its runner wants every argument of
    the kernel's signature in order, constexprs included. Also records the key's tuned config
    for torch.compile (_TUNED)."""
    names = _attn_fwd.fn.arg_names
    _TUNED[tuning_key(dict(zip(names, args)), consts)] = _attn_fwd.best_config
    if not (hasattr(compiled, "run") and hasattr(compiled, "__getitem__")):
        return  # a Triton whose launch returns no compiled kernel: the slow path stays
    values = {**consts, **_attn_fwd.best_config.kwargs}
    # after q, k, v and out, every argument is fixed by the key: strides, sizes, constexprs
    tail = args[4:] + tuple(values[n] for n in names[len(args) :])
    _FAST_LAUNCH.remember(key, (direct_launcher(compiled, grid), tail, values["TMA"]))


def _launch_known(q, k, v, causal: bool, window: int):
    """The eager fast path: the output, with the key's compiled kernel launched straight on it;
    None where this key has none yet (the caller then checks the inputs and autotunes). A known
    key passed check_inputs before, so it is not checked again."""
    out = torch.empty_like(q)
    known = _FAST_LAUNCH.get(launch_key(q, k, v, out, causal, window))
    if known is None:
        return None
    run, tail, uses_tma = known
    if uses_tma:
        ensure_allocator()
    if _autograd_profiler._is_profiler_enabled:
        # a raw launch goes through no torch op, so a profile would show the kernel launched by
        # nothing: name its launcher as Inductor names its own launches (its tensors, so a
        # profile with shapes has the bytes the kernel moves)
        with torch._C._profiler._RecordFunctionFast(OP_NAME, (q, k, v, out)):
            run(q, k, v, out, *tail)
    else:
        run(q, k, v, out, *tail)
    return out


def _torch_scratch(size: int, alignment: int, stream):
    """Global scratch for Triton's on-device tensor descriptors, from torch's caching
    allocator (on the current stream, as Triton asks)."""
    return torch.empty(size, dtype=torch.int8, device="cuda")


def ensure_allocator() -> None:
    """A TMA config builds its descriptors in global scratch, which eager Triton takes from
    the allocator set by triton.set_allocator (Inductor sets its own under torch.compile).
    Sets torch's where none is set in this thread's context (Triton keeps it in a ContextVar),
    and leaves a user's own allocator alone."""
    from triton.runtime import _allocation

    current = getattr(_allocation, "_allocator", None)
    null = getattr(_allocation, "NullAllocator", None)
    if current is None or null is None or isinstance(current.get(), null):
        triton.set_allocator(_torch_scratch)


def _launch(q, k, v, causal: bool, window: int, kernel=None):
    """Launch `kernel` (default: the autotuned Triton kernel itself, the eager path). The op
    passes torch.library.wrap_triton's wrapper instead, through which torch.compile sees the
    kernel (wrap_triton hands back the bare kernel where wrapping is off, as in the op's own
    eager dispatch). The eager path remembers the key's compiled kernel, which its later calls
    launch straight (_launch_known)."""
    batch, heads, seq, dim = q.shape
    out = torch.empty_like(q)
    args = (
        q,
        k,
        v,
        out,
        *q.stride(),
        *k.stride(),
        *v.stride(),
        *out.stride(),
        heads,
        heads // k.shape[1],
        seq,
        triton.next_power_of_2(seq),
        l2_group_heads(k.shape[2], dim, k.element_size(), heads // k.shape[1]),
    )
    eager = kernel is None and not INTERPRET
    consts = dict(
        HEAD_DIM=dim,
        SM_SCALE=1.0 / math.sqrt(dim),
        CAUSAL=causal,
        WINDOW=window,
        TMA_OK=tma_ok(q, k, v),
    )

    if consts["TMA_OK"] and not INTERPRET:  # (under torch.compile Inductor sets its own)
        ensure_allocator()

    def grid(meta):
        return (batch * heads, triton.cdiv(seq, meta["BLOCK_M"]))

    if not eager:
        (kernel or _attn_fwd)[grid](*args, **consts)
        return out
    key = launch_key(q, k, v, out, causal, window)
    with _AUTOTUNE_LOCK:  # the best config read below must be this call's, not another thread's
        compiled = _attn_fwd[grid](*args, **consts)
        _remember_launch(key, compiled, args, consts, (*grid(_attn_fwd.best_config.kwargs), 1))
    return out


if hasattr(torch.library, "triton_op"):

    @torch.library.triton_op(OP_NAME, mutates_args=())
    def _flash_op(
        q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, window: int
    ) -> torch.Tensor:
        # wrap_triton: so Inductor sees the kernel, not a blob
        return _launch(q, k, v, causal, window, torch.library.wrap_triton(_attn_fwd))
else:  # torch < 2.6: no triton_op; eager only
    _flash_op = _launch


_launch_interpreted = outside_compile(_launch)


def flash_attention(q, k, v, causal: bool = True, window: int = 0):
    """softmax(q kT / sqrt(D) + mask) v for q [B, H, S, D], k/v [B, H_kv, S, D]; or, at a
    decode shape, q [B, H, Q, D] over k/v [B, H_kv, K, D] with Q < K (the split-KV kernel,
    causal bottom-right).

    Eagerly the kernel is launched straight away: the custom op's dispatch would cost more host
    time than the kernel takes at small shapes. Under torch.compile the call goes through the
    op (a triton_op), so Inductor sees the kernel, schedules it and keeps it in CUDA graphs.
    """
    if not INTERPRET and not torch.compiler.is_compiling():
        if q.shape[2] != k.shape[2] and not window:
            from compilekit.variants.triton_flash_decode import launch_known as decode_known

            out = decode_known(q, k, v, causal)
        else:
            out = _launch_known(q, k, v, causal, window)
        if out is not None:
            return out
    check_inputs(q, k, v, causal, window)
    if q.shape[2] != k.shape[2]:  # a few queries over a cache: split over the keys
        return _decode(q, k, v, causal, window)
    if INTERPRET:  # the interpreter runs on host tensors; skip the op layer it cannot trace
        return _launch_interpreted(q.contiguous(), k.contiguous(), v.contiguous(), causal, window)
    if torch.compiler.is_compiling():
        return _flash_op(q, k, v, causal, window)
    return _launch(q, k, v, causal, window)


def cached_attention(q, k, v, kv_lens):
    """Causal attention over a model's static KV cache: q [B, H, Q, D] holds, for each row b,
    the last Q of the first kv_lens[b] positions of k, v [B, H_kv, K, D] (kv_lens: int32 [B]
    on q's device, each at least Q); keys past kv_lens[b] are never read. A decode step is
    Q = 1 with kv_lens the position + 1. The split-KV kernel (variants/triton_flash_decode.py),
    launched straight eagerly and through its triton_op under torch.compile, so a CUDA graph
    keeps it and reads the lengths from the device each replay."""
    from compilekit.variants import triton_flash_decode as decode

    if not INTERPRET and not torch.compiler.is_compiling():
        out = decode.launch_known(q, k, v, True, kv_lens)
        if out is not None:
            return out
    check_inputs(q, k, v, True, 0)
    wanted = (torch.int32, (q.shape[0],), q.device)
    if (kv_lens.dtype, tuple(kv_lens.shape), kv_lens.device) != wanted:
        raise Unsupported(
            f"kv_lens must be int32 [{q.shape[0]}] on {q.device}; got {kv_lens.dtype} "
            f"{list(kv_lens.shape)} on {kv_lens.device}"
        )
    return _decode(q, k, v, True, 0, kv_lens)


def _decode(q, k, v, causal: bool, window: int, kv_lens=None):
    """q [B, H, Q, D] over longer k, v (variants/triton_flash_decode.py); kv_lens: each row's
    filled keys (cached_attention)."""
    from compilekit.variants import triton_flash_decode as decode

    if window:
        raise Unsupported("triton-flash's sliding window takes queries and keys of one length")
    decode.check(q, k)
    if INTERPRET:
        q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
        return decode.launch_interpreted(q, k, v, causal, kv_lens=kv_lens)
    if torch.compiler.is_compiling():
        return decode.decode_op(q, k, v, causal, kv_lens)
    return decode.launch(q, k, v, causal, kv_lens=kv_lens)


def attention(q, k, v):
    return flash_attention(q, k, v, causal=True)


if __name__ == "__main__":  # this variant alone: its time and error at the default shape
    from compilekit.variants.standalone import main

    raise SystemExit(main(__file__, attention, globals().get("reference")))
