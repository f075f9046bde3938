"""Every setting compilekit changes inside torch, in one place, restored on exit.

A cell's processes compile with the same settings (they are part of Inductor's cache key, so
the timed process reuses exactly what the first compile built):
- CPU: `cpp.enable_kernel_profile`: Inductor wraps each C++ kernel in RECORD_FUNCTION so the
  profiler can see it. Without an active profiler that is one flag check per kernel call.
- the capture recompile only: `trace.provenance_tracking_level = 1` (torch >= 2.9), the kernel ->
  FX node -> source line mapping that the kernel map reads.
- the cell's own Inductor options (`--set`, `[configs]`), also given to torch.compile: set here
  too for the knobs Inductor reads at run time rather than at compile time; and the cell's
  custom graph passes (`--pass`), as one composite object at `joint_custom_pre_pass`.
- CPU: Inductor's ISA probes run in a folder every cell shares (shared_isa_probes).
- in a sweep, each of Inductor's GPU benchmarks and each Triton autotuner's config timing runs
  with the GPU alone (benchmarks_alone), and a compile's start and end let go of and take again
  the GPU (around_compiles).
Environment variables the parent sets for each process (cache directories, TORCH_TRACE, compile
threads) are listed in runner.PHASE_ENV.
"""

from __future__ import annotations

import contextlib
import functools
import os

# the folder of Inductor's CPU ISA probes that every cell shares (set by the parent: runner.py)
ISA_PROBES = "COMPILEKIT_ISA_PROBES"


def toolkit_changes(device: str, capture: bool) -> dict:
    """{Inductor config key: value} that compilekit sets for this device and process."""
    from torch._inductor import config

    changes = {}
    if device == "cpu":
        changes["cpp.enable_kernel_profile"] = True
    if capture and hasattr(config.trace, "provenance_tracking_level"):
        changes["trace.provenance_tracking_level"] = 1
    return changes


@contextlib.contextmanager
def toolkit_settings(
    device: str, capture: bool = False, cell_config: dict | None = None, graph_pass=None
):
    """Set toolkit_changes(), the cell's own options and its custom pass (at
    joint_custom_pre_pass) for the block, restore every one of them after; yields
    toolkit_changes() (what compilekit itself set)."""
    from torch._inductor import config

    if device == "cpu":
        shared_isa_probes()
    changes = toolkit_changes(device, capture)
    from compilekit.compile.knobs import inductor_options

    cell_changes = inductor_options(dict(cell_config or {}))
    if graph_pass is not None:
        cell_changes["joint_custom_pre_pass"] = graph_pass
    with config.patch({**cell_changes, **changes}):
        yield changes


def shared_isa_probes() -> None:
    """Inductor's CPU ISA probes, built in the folder ISA_PROBES names rather than in the cell's
    own empty cache. They are a machine's C++ test builds (one with ATen's vector headers: 5 s
    on 2 cores, more than a small cell's whole compile), which a user's Inductor cache holds
    from their first compile on: a cold figure that paid them would be a new machine's, not a
    new model's. torch keeps the answer for the process, so later compiles never probe."""
    folder = os.environ.get(ISA_PROBES)
    if not folder:
        return
    from torch._inductor import cpu_vec_isa

    own = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = folder  # where Inductor's code cache writes
    try:
        cpu_vec_isa.valid_vec_isa_list()
    finally:
        if own is None:
            os.environ.pop("TORCHINDUCTOR_CACHE_DIR", None)
        else:
            os.environ["TORCHINDUCTOR_CACHE_DIR"] = own


_AROUND: list = []  # the (on_start, on_end) pairs of the around_compiles blocks now open


def _on_compile(which: int):
    def hook(*args):  # torch >= 2.6 passes CallbackArgs; earlier versions pass nothing
        trigger = getattr(args[0], "callback_trigger", None) if args else None
        if trigger is None or trigger.name == "DYNAMO":
            for pair in list(_AROUND):
                pair[which]()

    return hook


_START, _END = _on_compile(0), _on_compile(1)


@contextlib.contextmanager
def around_compiles(on_start, on_end):
    """Call on_start() when a Dynamo compile begins and on_end() when it is done, for the block.
    Through torch's compile callbacks, registered once and left in place (torch may clear its
    list, e.g. in torch._dynamo.reset(); they are registered again then), doing nothing outside
    such a block. Only Dynamo's compiles: torch also signals CUDA-graph recordings this way, and
    those run kernels."""
    from torch._dynamo import callback

    handler = callback.callback_handler
    if _START not in handler.start_callbacks:
        handler.register_start_callback(_START)
    if _END not in handler.end_callbacks:
        handler.register_end_callback(_END)
    pair = (on_start, on_end)
    _AROUND.append(pair)
    try:
        yield
    finally:
        _AROUND.remove(pair)


@contextlib.contextmanager
def benchmarks_alone(alone):
    """Run each GPU benchmark that chooses a kernel inside `alone()`, a re-entrant context
    manager, for the block: Inductor's (max-autotune's candidate kernels, a kernel's launch
    configs), and a Triton autotuner's timing of each of its configs (a hand-written kernel's
    @triton.autotune, on its first call eagerly: in a sweep beside other cells' kernels it
    chose 10-13% slower configs for triton-flash at S = 8192 and 16384). Inductor's through
    torch's own hook where it has one (torch >= 2.13: set_gpu_benchmark_lock_context); before
    that, each benchmarker class's `benchmark_gpu` is wrapped. Triton's Autotuner._bench is
    wrapped. Every wrapped method is put back on exit."""
    from torch._inductor.runtime import benchmarking

    patched = _autotuner_bench()
    set_context = getattr(benchmarking, "set_gpu_benchmark_lock_context", None)
    previous = None
    if set_context is not None:
        previous = set_context(alone)
    else:
        patched += [
            (cls, "benchmark_gpu", vars(cls)["benchmark_gpu"])
            for cls in vars(benchmarking).values()
            if isinstance(cls, type) and "benchmark_gpu" in vars(cls)
        ]
    for owner, name, original in patched:
        setattr(owner, name, _inside(alone, original))
    try:
        yield
    finally:
        for owner, name, original in patched:
            setattr(owner, name, original)
        if set_context is not None:
            set_context(previous)


def _autotuner_bench() -> list:
    """[(triton's Autotuner, "_bench", its own method)], or [] without Triton (CPU builds of
    torch) or where its Autotuner times configs elsewhere."""
    try:
        from triton.runtime.autotuner import Autotuner
    except ImportError:
        return []
    original = vars(Autotuner).get("_bench")
    return [(Autotuner, "_bench", original)] if original is not None else []


def _inside(alone, fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with alone():
            return fn(*args, **kwargs)

    return wrapper
