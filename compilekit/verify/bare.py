"""The bare child of `compilekit verify`: a fresh process that does what a user's own script
would, apart from the toolkit's timing code.

`python -m compilekit.verify.bare CELL_JSON LOOP_CALLS LOOP_REPEATS`, inside the cell's grad
mode: loads the variant, wraps it in the mode, calls it once (a warm compile from the cell's
cache) and times it with `triton.testing.do_bench` (GPU) or a perf_counter loop (CPU), and with
LOOP_CALLS set, a user's loop of back-to-back calls too. Prints one JSON line.
"""

from __future__ import annotations

import json
import sys
import time

CPU_SAMPLES = 100
LOOP_REPEATS = 21


def median(samples: list[float]) -> float:
    from compilekit.measure.timing import summary

    return summary(samples)["median_ms"]  # one median for the toolkit and the bare child


def bare_median_ms(fn, args, device: str) -> float:
    """Median of fn(*args): do_bench on CUDA (L2 flushed, as the toolkit), else perf_counter."""
    if device == "cuda":
        from triton.testing import do_bench

        from compilekit.measure.timing import GPU_BENCH_S

        rep = int(GPU_BENCH_S * 1e3)
        return float(do_bench(lambda: fn(*args), warmup=25, rep=rep, return_mode="median"))
    for _ in range(3):
        fn(*args)
    samples = []
    for _ in range(CPU_SAMPLES):
        start = time.perf_counter()
        fn(*args)
        samples.append((time.perf_counter() - start) * 1e3)
    return median(samples)


def bare_loop_ms(fn, args, calls: int, repeats: int = LOOP_REPEATS) -> float:
    """CUDA: ms per call of `calls` back-to-back calls between two events, the median over
    `repeats` such loops: a user's loop, written here apart from the toolkit's timing code."""
    import torch

    per_loop = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(calls):
            fn(*args)
        end.record()
        end.synchronize()
        per_loop.append(start.elapsed_time(end) / calls)
    return median(per_loop)


def _child(cell_json: str, loop_calls: int, loop_repeats: int = LOOP_REPEATS) -> None:
    from compilekit.compile import modes
    from compilekit.model.spec import Cell

    cell = Cell.from_dict(json.loads(cell_json))
    with modes.grad_context(cell.grad):  # as the cell's processes, and a user's loop
        _time_bare(cell, loop_calls, loop_repeats)


def _time_bare(cell, loop_calls: int, loop_repeats: int) -> None:
    from compilekit.compile import modes, settings
    from compilekit.compile.variant import load_variant
    from compilekit.measure import inputs

    variant = load_variant(cell.variant, cell.weights)
    args = inputs.cell_inputs(variant, cell)
    # the same Inductor settings as the run, so the cell's cache serves the same kernels
    graph_pass = None
    if cell.passes:
        from compilekit.compile.passes import composite

        graph_pass = composite(list(cell.passes))
    with settings.toolkit_settings(cell.device, False, dict(cell.config), graph_pass):
        variant.attention(*args)  # one eager call first, as the cell's processes (naive's mask)
        fn = modes.build(cell.mode, variant.attention, dict(cell.config))
        fn(*args)
        if cell.device == "cpu" and cell.mode != "eager":
            from torch._inductor import async_compile

            if hasattr(async_compile, "shutdown_compile_workers"):
                async_compile.shutdown_compile_workers()
        bare = {"median_ms": bare_median_ms(fn, args, cell.device)}
        if loop_calls:
            bare["loop_ms"] = bare_loop_ms(fn, args, loop_calls, loop_repeats)
        print(json.dumps(bare))


if __name__ == "__main__":
    _child(sys.argv[1], *(int(n) for n in sys.argv[2:4]))
