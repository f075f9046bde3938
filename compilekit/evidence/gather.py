"""The measure process's evidence, after its timed calls: the allocator's figures and one
forward's memory history, the profile and op cost matrix, the kernel map joined with the
capture, the roofline and the diagnostics."""

from __future__ import annotations

import os
import shutil

from compilekit.model.errors import first_line
from compilekit.model.spec import Shape, Tokens


def gather(cell, compiled, args, stage_dir, cache_dir, result, eager=None, held=None) -> None:
    """After the timed calls: the allocator's figures (eager's too, where `eager` ran; `held`:
    allocator.held_mb() as the timed calls left it) and history, profile, map, diagnostics."""
    import torch

    from compilekit.evidence import allocator
    from compilekit.model.store import read_json, write_json

    with result.step("allocator"):
        allocator.record(cell, compiled, eager, args, result, held)
    history = _record_history(cell, compiled, args, stage_dir, result)  # its own step
    label = f"{cell.variant}/{cell.mode}"
    with result.step("profile"):  # the profiler's import included
        from compilekit.compile import capture
        from compilekit.evidence import eagerlines, kernelmap, opcost, profiling

        prof = profiling.run_profiler(compiled, args, label, cell.device, stage_dir)
        itemsize = getattr(torch, cell.dtype).itemsize
        forward = profiling.forward_kernels(prof, label, cell.device, itemsize)
        eager_lines = definitions = None
        if cell.mode == "eager":
            eager_lines = eagerlines.eager_source_lines(compiled, args)
            definitions = eagerlines.raw_kernel_definitions()
    with result.step("memory_profile"):  # apart: its allocator hooks cost host time
        memory = None
        try:
            memory = opcost.memory_profile(compiled, args, label, cell.device)
        except Exception as exc:  # evidence beside the figures: it never fails the cell
            result.memory_note = (
                f"no memory per op: the profile_memory session failed ({first_line(exc)})"
            )
        op_rows = opcost.op_table(prof, cell.device, memory, label=label)
        write_json(os.path.join(stage_dir, "ops.json"), op_rows)
    with result.step("map"):
        graphs = {}
        capture_dir = os.path.join(cache_dir, "capture")
        if cell.mode != "eager":
            graphs = read_json(os.path.join(capture_dir, "graphs.json"))
            for name in ("depyf", "torch_trace"):  # the capture's evidence, kept with the run
                if os.path.isdir(os.path.join(capture_dir, name)):
                    shutil.copytree(os.path.join(capture_dir, name), os.path.join(stage_dir, name))
        # the two inputs of the map, kept so it can be read (and rebuilt) without a GPU
        write_json(os.path.join(stage_dir, "provenance.json"), graphs)
        write_json(os.path.join(stage_dir, "forward.json"), forward)
        kernel_files = capture.write_kernels(graphs, stage_dir)
        records = kernelmap.build_map(forward, graphs, kernel_files, stage_dir,
                                      cell.mode != "eager", eager_lines, definitions)  # fmt: skip
    with result.step("roofline"):  # the ceilings are measured once per machine, then kept
        from compilekit.evidence import envinfo, roofline

        # q, k, v in and the output (q's size) out: the attention's least traffic, and its
        # declared FLOPs; a model's inputs and FLOPs are the whole forward's, no one kernel's
        io_bytes, attention_flops = None, None
        if isinstance(cell.shape, Shape):
            io_bytes = sum(a.numel() * a.element_size() for a in (*args, args[0]))
            attention_flops = result.flops
        roofline.annotate(
            records,
            envinfo.device_ceilings(cell.device, os.path.dirname(cache_dir)),
            attention_flops,
            io_bytes,
        )
        result.roofline = roofline.summary(records)
    _write_timeline(history, records, graphs, stage_dir, result)
    write_json(
        os.path.join(stage_dir, "kernels.json"),
        {
            "forward_device_ms": forward["forward_device_ms"],
            "forward_overlap_ms": forward["forward_overlap_ms"],
            "forward_host_ms": forward["forward_host_ms"],
            "kernels_per_forward": forward["kernels_per_forward"],
            # the dtypes behind the profiler's `bytes`: recorded, or the cell's assumed (a
            # record whose bytes came from elsewhere says so in its `bytes_from`)
            "bytes_dtypes": forward["bytes_dtypes"],
            "io_bytes": io_bytes,  # what roofline.annotate gives a raw attention kernel
            "kernels": records,
            "by_source_line": kernelmap.by_source_line(records),
        },
    )
    _diagnose(cell, forward, records, op_rows, result)


def _record_history(cell, compiled, args, stage_dir: str, result):
    """CUDA: one forward under the allocator's history, its snapshot in the run (the
    timeline's (events, before)); None on the CPU or where it failed (the reason recorded)."""
    if cell.device != "cuda":
        return None
    from compilekit.evidence import timeline

    with result.step("memory_history"):
        try:
            return timeline.record_forward(
                compiled, args, os.path.join(stage_dir, timeline.SNAPSHOT)
            )
        except Exception as exc:  # evidence beside the figures (an OOM here): never fails
            result.memory["timeline_error"] = first_line(exc)
            return None


def _write_timeline(history, records: list, graphs: dict, stage_dir: str, result) -> None:
    """memory_timeline.json from the recorded history, its tensors named through the map."""
    if history is None:
        return
    from compilekit.evidence import timeline
    from compilekit.model.store import write_json

    try:
        found = timeline.summarize(*history, records, graphs)
        write_json(os.path.join(stage_dir, timeline.TIMELINE), found)
    except Exception as exc:  # evidence beside the figures: it never fails the cell
        result.memory["timeline_error"] = first_line(exc)


def _diagnose(cell, forward: dict, records: list, op_rows: list, result) -> None:
    """The record's figures from the profile and the map: kernels and device time per forward,
    the GPU's busy share, the SDPA backend that ran, Dynamo's counters, the CUDA-graph replay."""
    import torch

    from compilekit.evidence import diagnose

    result.kernels_per_forward = forward["kernels_per_forward"]
    result.profiled_forward_device_ms = forward["forward_device_ms"]
    result.profiled_forward_overlap_ms = forward["forward_overlap_ms"]
    result.profiled_forward_host_ms = forward["forward_host_ms"]
    diagnose.judge_host_bound(result)
    result.sdpa_backend = diagnose.sdpa_backend(records, [row["name"] for row in op_rows])
    if isinstance(cell.shape, Tokens):  # a model (a forward, or a decode's step)
        from compilekit.evidence import shares

        result.time_shares = shares.shares(records)
    if cell.mode != "eager":
        result.dynamo = diagnose.dynamo_counters()
    diagnose.judge_attention_rewrite(result, records)
    if (result.cudagraphs or {}).get("applied"):
        result.replay = diagnose.replay_breakdown(
            records,
            result.host_ms_per_call,
            diagnose.cudagraph_tree_stats(torch.cuda.current_device()),
            result.dynamo["inductor"].get("cudagraph_recorded_non_static_inputs", 0),
        )
        result.replay["bytes_dtypes"] = forward["bytes_dtypes"]
