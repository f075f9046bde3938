"""Launching a compiled Triton (or Gluon) kernel again, cheaply: the eager fast paths of
variants/triton_flash.py, triton_flash_decode.py and gluon_flash.py, where a shape's later calls
skip Triton's dispatch and its runner's per-call work. Not a variant: a helper beside masks.py."""

import heapq
import itertools
import os
import sys

import torch

try:
    import triton
except ImportError:  # CPU builds of torch come without triton
    triton = None

# Triton's interpreter (TRITON_INTERPRET=1, read by Triton when it is imported): the kernels then
# run in numpy on the CPU, where the fast paths and most tile configs have no point
INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"


def outside_compile(launch):
    """`launch` run outside torch.compile's trace, for Triton's interpreter: it runs a kernel
    in numpy over the tensors' host memory, which Dynamo cannot trace with fake tensors, so a
    compiled cell on a CPU breaks its graph there (the cell reports the break, with this
    reason) and the kernel runs as it does eagerly. Made once, at import: calling
    torch.compiler.disable inside a traced function is a graph break of its own."""
    return torch.compiler.disable(
        launch,
        reason="Triton's interpreter (TRITON_INTERPRET=1) runs the kernel outside the graph",
    )


# The K and V bytes the tiles running at once may share through L2: FlashAttention-3's budget
# (its tile scheduler, for the H100's 50 MB L2; the H200's is the same size), the rest left to
# Q, O and other traffic.
L2_KV_BYTES = 32 * 2**20
# At most this many (batch, head) rows a group, however many L2_KV_BYTES would hold: where short
# heads let one group span every head, the first tiles to run are each head's longest (causal)
# and its K and V must stay in L2 until its last query block runs, waves later, with Q and O
# streaming past. On the H200 gluon-flash's 64-row tiles took 0.0419 ms at 16x16x512x64 in
# groups of 32 against 0.0451 in one group of all 256 (0.0431 with 64, 0.0436 with 8), and
# 0.0584 against 0.0602 at 8x16x1024x64 (all 128; 0.0589 with 64, 0.0624 with 8):
# dev/results/h200/gluon_flash/bench_l2_rows_2026-12-04.txt; both kernels with and without
# the cap: bench_l2_cap_*. 0: no cap.
L2_GROUP_MAX_ROWS = 32


def l2_group_heads(seq_k: int, dim: int, itemsize: int, kv_group: int) -> int:
    """How many (batch, head) rows of tiles to run together, all query blocks of the group
    before the next group's: a group's K and V (each K/V head's seq_k x dim, twice) fit in
    L2_KV_BYTES, so the tiles running at once read them from L2, not from memory, and it has at
    most L2_GROUP_MAX_ROWS rows. A power of two of K/V heads, times the query heads that share
    each (kv_group). Heads varying fastest across all of B x H (a group of every head) re-read
    K and V from memory for every query block once B x H x seq_k x dim outgrows L2."""
    per_kv_head = 2 * seq_k * dim * itemsize
    heads = max(1, L2_KV_BYTES // per_kv_head)
    if L2_GROUP_MAX_ROWS:
        heads = max(1, min(heads, L2_GROUP_MAX_ROWS // kv_group))
    return (1 << (heads.bit_length() - 1)) * kv_group


def tile_of(tile: int, bh: int, n_m: int, l2_heads: int, causal: bool) -> tuple[int, int]:
    """(B*H row, query block) of tile number `tile`, as the kernels' `_tile_of` order them:
    rows in groups of l2_heads, every query block of a group before the next group's, the
    group's rows varying fastest; under a causal mask the query blocks last-first."""
    first = tile // (l2_heads * n_m) * l2_heads
    size = min(l2_heads, bh - first)
    rest = tile - first * n_m
    block = rest // size
    return first + rest % size, (n_m - 1 - block if causal else block)


# A tile's fixed cost beside its key blocks (Q's load, the epilogue), in key blocks: the cost
# model persistent_schedule balances
TILE_OVERHEAD_BLOCKS = 1


def persistent_schedule(
    bh: int, seq: int, block_m: int, block_n: int, l2_heads: int, causal: bool, programs: int
) -> tuple[list[int], list[int]]:
    """(tiles, starts): a persistent grid's program p runs tiles[starts[p]:starts[p + 1]].
    Tiles are dealt in the kernels' order (tile_of) to whichever program has the least work so
    far (key blocks, plus TILE_OVERHEAD_BLOCKS a tile), as a GPU's block scheduler hands them
    out to the SM that frees up first. Dealt round-robin instead, the heaviest-first order gives
    the same programs the heaviest tile of every round: under that model the slowest program
    carries 12-21% more than the average at the D = 128 shapes of the kernel table, this
    0-2%. Each program's tiles stay in the kernels' order, so the tiles running at once stay
    within an L2 group."""
    n_m = -(-seq // block_m)
    blocks = []
    for tile in range(bh * n_m):
        _, block = tile_of(tile, bh, n_m, l2_heads, causal)
        keys = min((block + 1) * block_m, seq) if causal else seq
        blocks.append(-(-keys // block_n))
    return deal(blocks, programs)


def deal(blocks: list[int], programs: int) -> tuple[list[int], list[int]]:
    """(tiles, starts) for tiles 0, 1, ... of `blocks[t]` key blocks each, in that order, each
    dealt to whichever of `programs` has the least work so far (key blocks, plus
    TILE_OVERHEAD_BLOCKS a tile): program p runs tiles[starts[p]:starts[p + 1]], in order."""
    load = [(0, p) for p in range(programs)]
    dealt = [[] for _ in range(programs)]
    for tile, n in enumerate(blocks):
        work, p = heapq.heappop(load)
        dealt[p].append(tile)
        heapq.heappush(load, (work + n + TILE_OVERHEAD_BLOCKS, p))
    starts = [0, *itertools.accumulate(len(d) for d in dealt)]
    return [t for d in dealt for t in d], starts


def tensor_key(*tensors) -> tuple:
    """What a compiled Triton kernel is specialized on for these tensor arguments: each one's
    shape and strides (passed as integer arguments, which Triton specializes on 1 and on
    divisibility by 16), dtype, device and pointer alignment to 16 bytes."""
    return tuple((t.shape, t.stride(), t.dtype, t.device, t.data_ptr() % 16) for t in tensors)


class LaunchCache(dict):
    """launch key -> what a fast path needs to launch that key's compiled kernels straight.
    Bounded: a process that walks through many shapes (a sweep, a ragged workload) would
    otherwise keep every one; when full it starts again empty, which only costs the next call
    of each key one slow launch."""

    def __init__(self, limit: int = 256):
        super().__init__()
        self.limit = limit

    def remember(self, key, value) -> None:
        if len(self) >= self.limit:
            self.clear()
        self[key] = value


def autotune_key(names: tuple, named_args: dict, kwargs: dict) -> tuple:
    """What an autotuner keys on (its `key` list `names`, and Q's dtype), from a launch's
    arguments."""
    value = {**named_args, **kwargs}
    return (*(value.get(n) for n in names), str(named_args["Q"].dtype))


def eager_winner(tuned: dict, key_of, configs: list, named_args: dict, kwargs: dict) -> list:
    """`configs`, or only the config this process's eager autotuning chose for the launch's key
    (tuned: key_of(named_args, kwargs) -> config) where it is among them: torch.compile's own
    tuning of the kernel (Inductor times the configs again, apart) then runs the same kernel
    as eager. Every config for a symbolic size (torch.compile's dynamic shapes), which cannot
    be hashed and matches no eager key."""
    try:
        winner = tuned.get(key_of(named_args, kwargs))
    except TypeError:
        return configs
    return [winner] if any(c is winner for c in configs) else configs


def _launch_hooks_set() -> bool:
    """Whether a Triton launch hook is set (a profiler such as proton): Triton's own runner
    must then launch, so the hooks see the launch. Triton 3.6+ keeps them in HookChains, which
    its runner calls on every launch even when empty; older ones use None for none."""
    runtime = getattr(getattr(triton, "knobs", None), "runtime", None)
    if runtime is None:
        return True  # a Triton without knobs: no direct launch
    hooks = (runtime.launch_enter_hook, runtime.launch_exit_hook)
    return any(h is not None and getattr(h, "calls", True) for h in hooks)


def direct_launcher(compiled, grid: tuple):
    """A function that launches `compiled` (a Triton CompiledKernel) on `grid` with every
    argument of its signature, as `compiled[grid]` does, less the per-call work a launch with no
    hooks does not need: the device and stream looked up through Triton's driver proxy, the
    launch metadata built for the hooks, and the calls into the (empty) hook chains. Where a
    hook is set, or this Triton's CompiledKernel lacks the pieces, Triton's runner launches."""
    runner = compiled[grid]
    run = getattr(compiled, "run", None)
    function = getattr(compiled, "function", None)
    packed = getattr(compiled, "packed_metadata", None)
    current_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if None in (run, function, packed, current_stream) or len(grid) != 3:
        return runner
    grid_x, grid_y, grid_z = grid
    current_device = torch._C._cuda_getDevice

    def launch(*args):
        if _launch_hooks_set():
            return runner(*args)
        stream = current_stream(current_device())
        return run(grid_x, grid_y, grid_z, stream, function, packed, None, None, None, *args)

    return launch


# Triton 3.6's launcher arguments before the kernel's own (grid, stream, function, cooperative,
# PDL, the two scratch buffers, metadata, launch metadata, the two hooks): the layout
# descriptor_launcher calls Triton's C launcher in
_TRITON_36_BASE_ARGS = "iiiKKppOOOOOO"
# the CUtensorMaps a descriptor launcher keeps of each descriptor, per base address (a later
# call of the same shape, whose tensors the caching allocator hands out at addresses it used
# before, hits)
DESCRIPTOR_MAPS_KEPT = 64


def _c_launcher(compiled):
    """(Triton's C launcher, the CudaLauncher around it, the function that expands a host TMA
    descriptor into the C launcher's arguments) where this Triton lays them out as 3.6 does:
    its CudaLauncher's `launch` a wrapper over the C launcher that encodes each descriptor's
    CUtensorMap anew every call. None elsewhere, and where the kernel takes scratch memory."""
    launcher = getattr(compiled, "run", None)
    wrapper = getattr(launcher, "launch", None)
    code = getattr(wrapper, "__code__", None)
    driver = sys.modules.get(getattr(type(launcher), "__module__", ""), None)
    if (
        code is None
        or "launcher" not in code.co_freevars
        or getattr(driver, "_BASE_ARGS_FORMAT", None) != _TRITON_36_BASE_ARGS
        or getattr(launcher, "global_scratch_size", 1)
        or getattr(launcher, "profile_scratch_size", 1)
        or not hasattr(driver, "make_tensordesc_arg")
    ):
        return None
    c_launch = wrapper.__closure__[code.co_freevars.index("launcher")].cell_contents
    return c_launch, launcher, driver.make_tensordesc_arg


def descriptor_launcher(compiled, grid: tuple, templates: tuple, rebase):
    """launch(bases, *rest): `compiled` (a Triton CompiledKernel whose first arguments are host
    TMA descriptors) on `grid`, with the descriptors `rebase(template, base)` makes over `bases`
    (a template per base, the launch key's first call's), then `rest`. Triton encodes each
    descriptor's CUtensorMap anew on every launch (make_tensordesc_arg); here each is encoded
    on its base address's first call and kept (the launch key fixes everything else a map
    holds: shape, strides, dtype; each descriptor's maps apart, so a new output buffer beside
    known inputs encodes one map), and Triton's C launcher takes them straight: gluon-flash's
    launch took 12.3 µs of host against 23.3 through Triton's path at 16x16x512x64 on the H200,
    8.4 / 14.9 at 8x16x1024x64 and 14.5 / 24.6 at 2x32x4096x128, one process
    (dev/results/h200/gluon_flash/launch_cost_kept_maps_2026-12-04.txt). Where this Triton
    lays its launcher out otherwise, or a launch hook is set, direct_launcher's path."""
    direct = direct_launcher(compiled, grid)

    def rebased_launch(bases, *rest):
        return direct(*(rebase(t, b) for t, b in zip(templates, bases)), *rest)

    pieces = _c_launcher(compiled)
    current_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    # no metadata: descriptors Triton decomposes for the device, whose arguments hold the tensor
    meta = getattr(getattr(compiled, "metadata", None), "tensordesc_meta", None)
    if pieces is None or current_stream is None or len(grid) != 3 or not meta:
        return rebased_launch
    c_launch, launcher, expand = pieces
    # the C launcher's arguments between the stream and the kernel's: no scratch buffers, no
    # launch metadata, no hooks
    after_stream = (
        compiled.function, launcher.launch_cooperative_grid, launcher.launch_pdl, None, None,
        compiled.packed_metadata, None, None, None,
    )  # fmt: skip
    current_device = torch._C._cuda_getDevice
    # per descriptor: its base's address -> the descriptor's expansion over that base
    maps = tuple(LaunchCache(DESCRIPTOR_MAPS_KEPT) for _ in templates)
    described = tuple(zip(templates, meta, maps))

    def launch(bases, *rest):
        if _launch_hooks_set():
            return rebased_launch(bases, *rest)
        expanded = []
        for (template, m, kept), base in zip(described, bases):
            at = base.data_ptr()
            one = kept.get(at)
            if one is None:
                one = expand(rebase(template, base), m)
                kept.remember(at, one)
            expanded += one
        stream = current_stream(current_device())
        return c_launch(*grid, stream, *after_stream, *expanded, *rest)

    launch.kept = maps  # what a test reads: the maps kept so far
    return launch
