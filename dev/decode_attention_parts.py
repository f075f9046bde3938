"""Where a decode attention call's time goes, path by path, at batch 1 and beyond.

For each path at each shape, in one process:
- `call`: the eager call as a user times it (do_bench median, before any profiler);
- `graph`: the same call captured in a CUDA graph and replayed (do_bench median): the host's
  launch cost gone, what is left is the GPU's;
- `clean`: the graph replay again, with L2 flushed by reading a buffer larger than it instead
  of do_bench's zeroing one: do_bench's flush leaves L2 full of dirty lines, which the timed
  call may have to write back to memory as it reads (at batch 1 and 8k keys, L2 holds more
  than the call reads), where a decode step in a model follows kernels that mostly read;
- from a torch.profiler session taken after all timing, with L2 flushed before each call as
  `clean` flushes it (read_flush): each of the call's kernels' device time, the gaps between
  them, and the call's span on the device (first kernel's start to last kernel's end); medians
  over the calls.
Each time is given beside the K/V bytes it reads (GB/s) and the device's copy ceiling, measured
here as compilekit measures it for every cell (compilekit.evidence.envinfo). Issue 80 asks
where triton-flash's batch-1 call goes beside cuDNN's: the split kernel, the combine, the gap
between them, the host, or the flush's dirty lines.

Usage (GPU): python dev/decode_attention_parts.py [--shapes "S;S"] [--paths P,P] [--calls 50]
             [--json out.json]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
from decode_varlen_bench import DECODE_SHAPES  # noqa: E402

READ = "read"  # not attention: K and V's bytes read by torch.sum, what any kernel may reach
# triton-flash asked for one way of combining: with its combine as a second kernel (as
# torch.compile launches it; triton-flash:pdl, that kernel as a programmatic dependent launch),
# or in one launch whose last programs combine (triton-flash:one-launch, and
# :one-launch:chunkN with combine_last holding N partial values per step,
# flash_decode_combine.CHUNK_VALUES, instead of its default). Such a call goes through the
# autotuner's dispatch every time: read its graph, clean and span
TWO_KERNELS = "triton-flash:two-kernels"
PDL = "triton-flash:pdl"
ONE_LAUNCH = "triton-flash:one-launch"
PATHS = f"triton-flash,{TWO_KERNELS},{PDL},{ONE_LAUNCH},sdpa-cudnn,sdpa-flash,sdpa,{READ}"
FLUSH_BYTES = 256 * 2**20  # as triton.testing.do_bench: larger than any GPU's L2


def kernel_events(trace: dict) -> list[dict]:
    """The device kernels of a chrome trace torch.profiler exported, by start time."""
    kernels = [e for e in trace.get("traceEvents", []) if e.get("cat") == "kernel"]
    return sorted(kernels, key=lambda e: e["ts"])


def calls_between_flushes(kernels: list[dict], flush_names: set[str]) -> list[list[dict]]:
    """The kernels of each call: a profiled call follows its L2 flush, so the kernels after one
    flush and before the next are one call's. Kernels before the first flush are dropped."""
    calls, current = [], None
    for k in kernels:
        if k["name"] in flush_names:
            if current:
                calls.append(current)
            current = []
        elif current is not None:
            current.append(k)
    if current:
        calls.append(current)
    return calls


def call_parts(calls: list[list[dict]]) -> dict:
    """Medians over the calls whose kernels are the most common sequence of names: each
    kernel's device time, each gap between consecutive kernels, and the span, in us; `others`
    counts the calls left out (a different sequence)."""
    if not calls:
        return {"calls": 0, "others": 0, "kernels": [], "gaps_us": [], "span_us": None}
    names = collections.Counter(tuple(k["name"] for k in c) for c in calls)
    common, count = names.most_common(1)[0]
    same = [c for c in calls if tuple(k["name"] for k in c) == common]

    def med(values):
        return statistics.median(values)

    return {
        "calls": count,
        "others": len(calls) - count,
        "kernels": [
            {"name": name, "us": med([c[i]["dur"] for c in same])} for i, name in enumerate(common)
        ],
        "gaps_us": [
            med([c[i + 1]["ts"] - (c[i]["ts"] + c[i]["dur"]) for c in same])
            for i in range(len(common) - 1)
        ],
        "span_us": med([c[-1]["ts"] + c[-1]["dur"] - c[0]["ts"] for c in same]),
    }


def _profile_parts(fn, calls: int) -> dict:
    import torch

    flush = read_flush()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        flush()  # alone first: its kernel's name marks each call's start
        torch.cuda.synchronize()
    flush_names = {k["name"] for k in _trace_kernels(prof)}
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            flush()
            fn()
        torch.cuda.synchronize()
    return call_parts(calls_between_flushes(_trace_kernels(prof), flush_names))


def _trace_kernels(prof) -> list[dict]:
    with tempfile.TemporaryDirectory() as scratch:
        path = os.path.join(scratch, "trace.json")
        prof.export_chrome_trace(path)
        with open(path) as f:
            return kernel_events(json.load(f))


def read_flush():
    """A flush of L2 that leaves it clean: a sum over a buffer larger than L2 reads it, where
    do_bench's zero_() writes it (and the next call writes those dirty lines back)."""
    import torch

    buffer = torch.ones(FLUSH_BYTES // 4, dtype=torch.float32, device="cuda")
    total = torch.empty((), dtype=torch.float32, device="cuda")
    return lambda: torch.sum(buffer, dim=0, out=total)


def clean_flush_us(fn, reps: int = 200) -> float:
    """fn's median time in us, each call after a read_flush."""
    import torch

    flush = read_flush()
    events = []
    for _ in range(reps):
        flush()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        events.append((start, end))
    torch.cuda.synchronize()
    return 1e3 * statistics.median(s.elapsed_time(e) for s, e in events[reps // 5 :])  # warm


def _graph_of(fn):
    """fn captured in a CUDA graph (after warm-up calls on a side stream, as torch's docs do)."""
    import torch

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return graph


def path_row(spec: str, shape_text: str, calls: int) -> dict:
    """One path at one shape: its call, its graph replay, its parts, its K/V bytes."""
    import torch
    import triton.testing

    from compilekit.compile.variant import load_variant
    from compilekit.measure import inputs as inputs_mod
    from compilekit.model.spec import Cell, parse_shape
    from compilekit.variants import flash_decode_combine, triton_flash_decode

    out = {"path": spec, "shape": shape_text}
    default_chunk = flash_decode_combine.CHUNK_VALUES
    try:
        fused = {TWO_KERNELS: False, PDL: False}.get(spec, spec.startswith(ONE_LAUNCH) or None)
        name = "sdpa" if spec == READ else "triton-flash" if fused is not None else spec
        if spec.startswith(ONE_LAUNCH + ":chunk"):
            flash_decode_combine.CHUNK_VALUES = int(spec[len(ONE_LAUNCH + ":chunk") :])
        triton_flash_decode._split_kernel.cache.clear()  # then it holds this shape's config
        variant = load_variant(name)
        cell = Cell(name, "eager", parse_shape(shape_text), "bfloat16", "cuda")
        args = inputs_mod.cell_inputs(variant, cell)
        out["kv_bytes"] = sum(a.numel() * a.element_size() for a in args[1:3])
        kv = torch.stack(args[1:3]) if spec == READ else None

        def fn():
            if kv is not None:  # the same bytes read by one reduction kernel, nothing else
                return torch.sum(kv, dtype=torch.float32)
            if fused is not None:
                return triton_flash_decode.launch(*args, causal=True, fused=fused, pdl=spec == PDL)
            return variant.attention(*args)

        fn()  # autotuning and the fast path's first launch, before any timing
        if name == "triton-flash":  # the split kernel's config the autotuner chose
            out["config"] = "; ".join(map(str, triton_flash_decode._split_kernel.cache.values()))
        out["call_us"] = 1e3 * triton.testing.do_bench(fn, warmup=50, rep=300)
        try:
            graph = _graph_of(fn)
            out["graph_us"] = 1e3 * triton.testing.do_bench(graph.replay, warmup=50, rep=300)
            out["clean_us"] = clean_flush_us(graph.replay)
        except Exception as exc:  # a path that cannot be captured says why, the rest goes on
            out["graph_error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
        out.update(_profile_parts(fn, calls))
    except Exception as exc:
        out["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
    flash_decode_combine.CHUNK_VALUES = default_chunk
    torch.cuda.empty_cache()
    return out


def describe(r: dict, ceiling_gbps: float) -> str:
    """One path's line: its times, each beside the GB/s its K/V bytes make of it."""
    if "error" in r:
        return f"  {r['path']:14} {r['error']}"

    def at(us):
        gbps = r["kv_bytes"] / us / 1e3
        return f"{us:8.2f} us {gbps:6.0f} GB/s ({gbps / ceiling_gbps:4.0%})"

    lines = [f"  {r['path']:14} call {at(r['call_us'])}"]
    if r.get("config"):
        lines.append(f"  {'':14} split kernel's config: {r['config']}")
    lines.append(
        f"  {'':14} graph {at(r['graph_us'])}"
        if "graph_us" in r
        else f"  {'':14} graph: {r['graph_error']}"
    )
    if "clean_us" in r:
        lines.append(f"  {'':14} clean {at(r['clean_us'])}  (L2 flushed by a read)")
    if r.get("span_us"):
        lines.append(
            f"  {'':14} span {at(r['span_us'])}  over {r['calls']} calls"
            + (f" ({r['others']} other sequences left out)" if r["others"] else "")
        )
    for i, k in enumerate(r.get("kernels", [])):
        gap = f"   then a gap of {r['gaps_us'][i]:.2f} us" if i < len(r["gaps_us"]) else ""
        lines.append(f"  {'':14}   {k['us']:8.2f} us  {k['name'][:70]}{gap}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", default=DECODE_SHAPES)
    parser.add_argument("--paths", default=PATHS)
    parser.add_argument("--calls", type=int, default=50, help="profiled calls per path")
    parser.add_argument("--json")
    args = parser.parse_args()
    import torch

    if not torch.cuda.is_available():
        sys.exit("decode_attention_parts.py: needs a CUDA GPU (CUDA graphs and kernel traces)")
    from compilekit.evidence.envinfo import measure_ceilings

    ceiling = measure_ceilings("cuda")["copy_gbps"]  # the ceiling every cell's gap line uses
    print(f"{torch.cuda.get_device_name()}: copy ceiling {ceiling:.0f} GB/s", flush=True)
    rows = []
    for shape in filter(None, args.shapes.split(";")):
        print(shape, flush=True)
        for spec in args.paths.split(","):
            rows.append(path_row(spec, shape, args.calls))
            print(describe(rows[-1], ceiling), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"copy_gbps": ceiling, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
