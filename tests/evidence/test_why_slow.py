"""Why a cell was slow: max-autotune's choices, each kernel on the roofline, CUDA-graph replay
costs. CPU cells from the shared cache; the replay accounting on made-up records here (CUDA
graphs exist only on a GPU: tests/evidence/test_gpu_evidence.py checks it there)."""

import json
import os
from types import SimpleNamespace

from compilekit.evidence import diagnose, profiling, roofline
from tests.conftest import gpu_lock_state

CEILINGS = {"matmul_tflops": 100.0, "copy_gbps": 1000.0}  # ridge: 100 FLOP per byte


def _kernels(result):
    with open(os.path.join(result.run_dir, "kernels.json")) as f:
        return json.load(f)["kernels"]


def test_max_autotune_records_its_choices_from_the_cold_compile(run_cell, cli):
    tuned, default = run_cell("naive", "max-autotune"), run_cell("naive", "default")
    assert default.autotune is None  # nothing was tuned
    ops = tuned.autotune
    assert [op["op"] for op in ops] == ["bmm", "bmm"], ops  # q @ kT and attn @ v
    for op in ops:
        times = [c["ms"] for c in op["choices"]]
        assert len(times) >= 2 and times == sorted(times)  # ATen's bmm and a C++ template
        assert op["winner"] == op["choices"][0]["name"]
        assert op["margin"] == times[1] / times[0]
    proc = cli("kernels", tuned.run_dir)
    assert proc.returncode == 0, proc.stderr
    assert "max-autotune bmm(" in proc.stdout and "speed vs winner" in proc.stdout
    # the capture compile read the cold one's choices back: it need not have had the GPU alone
    assert "capture" not in tuned.compile_notes, tuned.compile_notes


def test_the_capture_recompile_follows_the_cold_figure_and_compiles_share_the_gpu(
    tmp_path, monkeypatch
):
    """The capture recompile comes after cold.json is written: in the cold process itself, or
    under max-autotune in a fresh process of its own (in the same process it would tune again).
    Every compile, max-autotune's too, and the capture share the GPU: only Inductor's
    benchmarks inside a compile take it alone (tests/measure/test_locks.py). If the capture
    tunes again after all, the measure process says so."""
    import contextlib

    from compilekit.compile import capture
    from compilekit.launch import coldphase
    from compilekit.measure import calls
    from compilekit.measure import cell as measure_cell
    from compilekit.model.result import for_cell
    from compilekit.model.spec import Cell, parse_shape
    from compilekit.model.store import write_json

    lock = tmp_path / "gpu0.lock"
    monkeypatch.setenv("COMPILEKIT_GPU_LOCK", str(lock))
    cache = tmp_path / "cache"
    (cache / "capture").mkdir(parents=True)
    seen = []

    def first_call(cell, variant, args, record=None):
        seen.append({"gpu": gpu_lock_state(lock), "cold_json": (cache / "cold.json").exists()})
        return object(), 0.5, None

    monkeypatch.setattr(calls, "compiled_first_call", first_call)
    monkeypatch.setattr(capture, "capture_on", lambda where: contextlib.nullcontext())
    monkeypatch.setattr(capture, "read_trace", lambda where: {})
    plain = Cell("naive", "default", parse_shape("1x2x64x16"), "float32", "cpu")
    coldphase.run_cold(plain, str(cache), for_cell(plain))
    assert seen == [
        {"gpu": "shared", "cold_json": False},  # the cold compile
        {"gpu": "shared", "cold_json": True},  # the capture, in the same process, after it
    ]
    (cache / "cold.json").unlink()
    seen.clear()
    tuned = Cell("naive", "max-autotune", parse_shape("1x2x64x16"), "float32", "cpu")
    coldphase.run_cold(tuned, str(cache), for_cell(tuned))
    assert seen == [{"gpu": "shared", "cold_json": False}]  # no capture in this process
    assert "gpu_lock_wait_s" in json.loads((cache / "cold.json").read_text())["steps_s"]
    coldphase.run_capture(tuned, str(cache), for_cell(tuned))  # its own process's work
    assert seen[1:] == [{"gpu": "shared", "cold_json": True}]
    read = for_cell(tuned)
    read.compile_notes = {}
    measure_cell.read_capture(tuned, str(cache), read)
    assert "capture" not in read.compile_notes
    write_json(str(cache / "capture" / measure_cell.RETUNED), [{"op": "bmm"}, {"op": "bmm"}])
    measure_cell.read_capture(tuned, str(cache), read)
    assert "tuned 2 op(s) again" in read.compile_notes["capture"]


def test_matmul_kernels_carry_their_bytes_and_flops_from_the_profile(run_cell):
    # 1x4x128x32 float32, compiled: bmm(q, kT, out=scores) reads 2 x [4,128,32], writes [4,128,128]
    result = run_cell("naive", "default")
    first_bmm = next(k for k in _kernels(result) if k["launcher"].endswith("bmm"))
    assert first_bmm["bytes"] == (2 * 4 * 128 * 32 + 4 * 128 * 128) * 4
    assert first_bmm["flops"] == 2 * 4 * 128 * 128 * 32
    roof = first_bmm["roofline"]
    assert roof["gbps"] == first_bmm["bytes"] / (first_bmm["device_ms"] * 1e-3) / 1e9
    assert roof["bound"] in ("compute", "memory", "launch")
    assert result.roofline.startswith("roofline: ")


def _record(name, kind, ms, nbytes=None, flops=None, launcher="aten::bmm", calls=1.0):
    return {
        "name": name,
        "kind": kind,
        "launcher": launcher,
        "device_ms": ms,
        "calls_per_forward": calls,
        "bytes": nbytes,
        "flops": flops,
    }


def test_roofline_classes():
    place = roofline.place
    # 1 GFLOP over 1 MB: 1000 FLOP/B, above the ridge of 100
    assert place(_record("gemm", "extern", 0.02, 1e6, 1e9), CEILINGS)["bound"] == "compute"
    # 1 GFLOP over 100 MB: 10 FLOP/B, below it; 100 MB in 0.2 ms is 500 GB/s, half the ceiling
    memory = place(_record("gemm", "extern", 0.2, 1e8, 1e9), CEILINGS)
    assert memory["bound"] == "memory" and memory["bandwidth_share"] == 0.5
    assert memory["tflops"] == 5.0 and memory["compute_share"] == 0.05
    # a fused softmax: bytes, no FLOP count: memory-side; the same in 2 us: launch-bound
    assert (
        place(_record("triton_per_fused", "generated", 0.05, 1e6), CEILINGS)["bound"] == "memory"
    )
    assert (
        place(_record("triton_per_fused", "generated", 0.002, 1e6), CEILINGS)["bound"] == "launch"
    )
    # a template or library kernel without FLOPs, a graph replay without bytes: no claim
    assert place(_record("triton_tem_fused_bmm", "template", 0.05, 1e6), CEILINGS)["bound"] is None
    assert place(_record("nvjet", "extern", 0.05), CEILINGS)["bound"] is None


def test_pointwise_eager_ops_are_memory_side_by_their_whole_name():
    """An eager op with bytes and no FLOP count is memory-side when it is a pointwise or copy
    op, in place or private; aten::matmul, whose name ends in "mul", is not a multiply."""
    ops = ("aten::_softmax", "aten::_safe_softmax", "aten::masked_fill_", "aten::copy_",
           "aten::gelu", "aten::native_layer_norm")  # fmt: skip
    for op in ops:
        record = _record(op, "aten", 0.05, 1e6, launcher=op)
        assert roofline.place(record, CEILINGS)["bound"] == "memory", op
    matmul = _record("aten::matmul", "aten", 0.05, 1e6, launcher="aten::matmul")
    assert roofline.place(matmul, CEILINGS)["bound"] is None


def _sdpa_event(name, q, k, concrete, parent=None):
    return SimpleNamespace(
        name=name, input_shapes=[q, k, k], concrete_inputs=concrete, cpu_parent=parent
    )


def test_an_sdpa_ops_flops_follow_its_shapes_and_is_causal():
    flash = "aten::_scaled_dot_product_flash_attention"  # is_causal: its fifth argument
    q = [2, 8, 256, 64]
    causal = _sdpa_event(flash, q, q, [None, None, None, 0.0, True, False, None])
    assert profiling.sdpa_flops(causal) == 4 * 2 * 8 * 64 * (256 * 257 // 2)
    full = _sdpa_event(flash, q, q, [None, None, None, 0.0, False, False, None])
    assert profiling.sdpa_flops(full) == 4 * 2 * 8 * 64 * 256 * 256
    # 256 queries over 64 keys, causal from the top left: 64 * 65 / 2, then every key per row
    short = _sdpa_event(flash, q, [2, 8, 64, 64], [None, None, None, 0.0, True, False, None])
    assert profiling.sdpa_flops(short) == 4 * 2 * 8 * 64 * (64 * 65 // 2 + 192 * 64)
    # on CUDA the op inside launches the kernel: its SDPA op says what it computed
    inner = _sdpa_event("aten::_flash_attention_forward", [2, 256, 8, 64], [2, 256, 8, 64],
                        [None] * 9, parent=causal)  # fmt: skip
    assert profiling.sdpa_flops(inner) == profiling.sdpa_flops(causal)
    # cuDNN's inner op (its kernel's launcher on torch 2.11): is_causal is its SDPA op's seventh
    cudnn = _sdpa_event("aten::_scaled_dot_product_cudnn_attention", q, q,
                        [None] * 6 + [True, False, None])  # fmt: skip
    cudnn_inner = _sdpa_event("aten::_cudnn_attention_forward", q, q, [None] * 12, cudnn)
    assert profiling.sdpa_flops(cudnn_inner) == profiling.sdpa_flops(causal)
    # and the inner op's bytes are q, k, v and the output it allocates
    cudnn_inner.input_dtypes = ["c10::BFloat16"] * 3
    assert profiling.launcher_bytes(cudnn_inner, 2) == 4 * 2 * 8 * 256 * 64 * 2
    public = _sdpa_event("aten::scaled_dot_product_attention", q, q, [None] * 5 + [True, None])
    assert profiling.sdpa_flops(public) == profiling.sdpa_flops(causal)
    assert profiling.sdpa_flops(_sdpa_event(flash, q, q, [])) is None  # no concrete inputs
    assert profiling.sdpa_flops(_sdpa_event("aten::bmm", q, q, [None, None])) is None


def test_eager_cpu_ops_carry_the_flops_of_the_work_inside_them(run_cell):
    """On a CPU an eager op is the outermost of its work: aten::matmul's FLOPs are the bmm's
    inside it, and SDPA's are its attention's, so each has a place on the roofline."""
    from compilekit.model.spec import parse_shape
    from compilekit.variants.masks import causal_flops

    shape = parse_shape("1x4x128x32")
    naive = {r["launcher"]: r for r in _kernels(run_cell("naive", "eager"))}
    assert naive["aten::matmul"]["flops"] == 2 * 4 * 128 * 128 * 32
    assert naive["aten::matmul"]["roofline"]["bound"] in ("compute", "memory")
    sdpa = run_cell("sdpa", "eager")
    attention = next(r for r in _kernels(sdpa) if "scaled_dot_product" in r["launcher"])
    assert attention["flops"] == causal_flops(shape) and "flops_from" not in attention
    assert "not placed" not in sdpa.roofline, sdpa.roofline


def test_a_kernel_faster_than_the_kept_ceiling_says_to_measure_the_ceiling_again():
    from compilekit.report import pages

    # 1.35 GFLOP in 0.01 ms: 135 TFLOP/s against a kept ceiling of 100; 102 is timing noise
    fast = roofline.place(_record("gemm", "extern", 0.01, 1e6, 1.35e9), CEILINGS)
    level = roofline.place(_record("gemm", "extern", 0.01, 1e6, 1.02e9), CEILINGS)
    assert fast["bound"] == "compute" and roofline.over_ceiling(fast)
    assert pages._roofline_text(fast) == (
        "compute, 135% of matmul TFLOP/s (over the kept ceiling: `compilekit env --remeasure`)"
    )
    assert pages._roofline_text(level) == "compute, 102% of matmul TFLOP/s"


def test_roofline_summary_splits_device_time_and_claims_nothing_unplaced():
    """Each class's share of the device time, and how near its roof it runs: its bytes (or
    FLOPs) over its time, not the mean of its kernels' shares (3% and 10% here)."""
    records = [
        _record("cudnn_sdpa", "library", 0.06),
        _record("triton_per_fused", "generated", 0.03, 1e6),
        _record("triton_poi_fused", "generated", 0.01, 1e6),
        # two calls of 0.05 ms, each 2.5 GFLOP: 50 TFLOP/s against a ceiling of 100
        _record("gemm", "extern", 0.05, 1e6, 2.5e9, calls=2.0),
    ]
    roofline.annotate(records, CEILINGS)
    assert roofline.summary(records) == (
        "roofline: 50% compute (at 50% of matmul TFLOP/s), "
        "30% not placed (no bytes or FLOPs recorded), 20% memory (at 5% of copy GB/s)"
    )
    # 1.35 GFLOP in 0.01 ms: 135 TFLOP/s, a class faster than the kept ceiling says so
    over = [_record("gemm", "extern", 0.01, 1e6, 1.35e9)]
    roofline.annotate(over, CEILINGS)
    assert roofline.summary(over) == (
        "roofline: 100% compute (at 135% of matmul TFLOP/s, over the kept ceiling)"
    )
    alone = records[:1]
    assert (
        roofline.summary(alone)
        == "roofline: no kernel placed (no bytes or FLOPs recorded for any)"
    )


def test_replay_breakdown_separates_copies_graph_work_and_host_time():
    mib16 = 16 * 2**20
    records = [
        _record("Memcpy DtoD", "memcpy", 0.007, 2 * mib16, launcher="aten::copy_")
        for _ in range(3)
    ] + [
        _record("Memcpy DtoD", "memcpy", 0.001, 2 * 2**20, launcher="aten::copy_"),
        _record("nvjet_a", "extern", 0.02),
        _record("triton_per_fused", "generated", 0.03),
        _record("nvjet_b", "extern", 0.02),
    ]
    out = diagnose.replay_breakdown(records, 0.1, {"recordings": 1, "rerecords": 0}, 4)
    assert out["input_copy_launches_per_call"] == 4 and out["inputs_recorded_non_static"] == 4
    assert out["input_copy_mib"] == 49.0
    assert abs(out["input_copy_ms"] - 0.022) < 1e-12
    assert abs(out["graph_gpu_ms"] - 0.07) < 1e-12
    assert abs(out["graph_share"] - 0.07 / 0.092) < 1e-12
    assert "49.0 MiB" in out["note"] and "more host time than the graph's GPU work" in out["note"]
    fast_host = diagnose.replay_breakdown(records, 0.01, None, 4)
    assert "GPU work outlasts" in fast_host["note"] and "recording" not in fast_host["note"]


def test_replay_breakdown_counts_inputs_copied_by_one_foreach_kernel():
    """As compiled SDPA's graph pays on the H200: q, k and v copied by two multi-tensor
    kernels launched from aten::_foreach_copy_, which records no shapes (no MiB claimed)."""
    records = [
        _record("cudnn_generated_fort_native_sdpa", "library", 0.057),
        _record("multi_tensor_apply_kernel", "extern", 0.0207, launcher="aten::_foreach_copy_"),
        _record("multi_tensor_apply_kernel", "extern", 0.0207, launcher="aten::_foreach_copy_"),
    ]
    out = diagnose.replay_breakdown(records, 0.124, {"recordings": 1, "rerecords": 0}, 3)
    assert out["input_copy_launches_per_call"] == 2 and out["input_copy_mib"] is None
    assert abs(out["input_copy_ms"] - 0.0414) < 1e-12
    assert abs(out["graph_gpu_ms"] - 0.057) < 1e-12
    assert "3 input(s) copied per call by 2 kernel launch(es) (_foreach_copy_," in out["note"]
    none = diagnose.replay_breakdown(records[:1], 0.05, None, 0)
    assert none["input_copy_ms"] == 0 and "no input copies seen" in none["note"]


def test_autotune_tables_parse_as_torch_prints_them():
    text = (
        "AUTOTUNE bmm(128x1024x64, 128x64x1024)\n"
        "strides: [65536, 64, 1], [65536, 1, 64]\n"
        "dtypes: torch.bfloat16, torch.bfloat16\n"
        "  bmm 0.0210 ms 100.0% \n"
        "  triton_bmm_3 0.0250 ms 84.0% ACC_TYPE='tl.float32', BLOCK_K=64, num_warps=4\n"
        "  triton_bmm_9 inf ms 0.0% ACC_TYPE='tl.float32'\n"
        "SingleProcess AUTOTUNE benchmarking takes 1.2 seconds and 0.3 seconds precompiling\n"
        "unrelated line\n"
    )
    (op,) = diagnose.parse_autotune(text)
    assert op["op"] == "bmm" and op["sizes"] == "128x1024x64, 128x64x1024"
    assert [c["name"] for c in op["choices"]] == ["bmm", "triton_bmm_3", "triton_bmm_9"]
    assert op["choices"][1]["description"].startswith("ACC_TYPE='tl.float32', BLOCK_K=64")
    assert op["winner"] == "bmm" and abs(op["margin"] - 0.025 / 0.021) < 1e-12


def test_launcher_bytes_with_and_without_recorded_dtypes():
    shapes = [[4, 128, 32], [4, 32, 128], []]  # bmm(a, b): the output is allocated inside
    with_dtypes = SimpleNamespace(
        name="aten::bmm", input_shapes=shapes, input_dtypes=["c10::BFloat16", "c10::BFloat16"]
    )
    out = 4 * 128 * 128
    assert profiling.launcher_bytes(with_dtypes, 4) == (2 * 4 * 128 * 32 + out) * 2
    # torch 2.11: shapes but no dtypes; the cell's itemsize stands in
    no_dtypes = SimpleNamespace(name="aten::copy_", input_shapes=[[64, 64], [64, 64], []])
    assert profiling.launcher_bytes(no_dtypes, 2) == 2 * 64 * 64 * 2
    assert profiling.launcher_bytes(SimpleNamespace(name="x", input_shapes=[]), 2) is None


def test_the_attention_kernel_gets_the_variants_flops_when_torch_counted_none():
    """cuDNN SDPA at the blog's shape, as the H200 recorded it (50 MB of q, k, v; no FLOPs):
    with the variant's 17.2 GFLOP it is placed, compute-side of a ridge of 100 FLOP/B."""
    flops = 4 * 8 * 16 * 64 * 1024 * 1025 / 2
    cudnn = [
        _record("Memset (Device)", "memcpy", 0.0006, 50331648, launcher="aten::_cudnn_attention"),
        _record("cudnn_generated_sdpa", "library", 0.0572, 50331648, launcher="aten::_cudnn"),
    ]
    roofline.annotate(cudnn, CEILINGS, flops)
    assert cudnn[1]["flops"] == flops and cudnn[0].get("flops") is None
    assert cudnn[1]["roofline"]["bound"] == "compute"
    assert abs(cudnn[1]["roofline"]["tflops"] - flops / 0.0572e-3 / 1e12) < 1e-9
    # torch counted the matmuls' FLOPs (naive): nothing is attributed
    naive = [_record("nvjet", "extern", 0.08, 1e8, 2e10), _record("cudnn_x", "library", 0.1)]
    assert roofline.attribute_variant_flops(naive, flops) is None and naive[1]["flops"] is None
    # no kernel holds half the time, or the variant declares no FLOPs: nothing either
    split = [
        _record("a", "library", 0.05),
        _record("b", "extern", 0.04),
        _record("c", "generated", 0.03),
    ]
    assert roofline.attribute_variant_flops(split, flops) is None
    assert (
        roofline.attribute_variant_flops(cudnn[:1] + [_record("d", "library", 1.0)], None) is None
    )


def test_a_raw_attention_kernel_is_placed_with_the_calls_least_traffic():
    """gluon-flash's eager kernel, as the H200 recorded it at 1x32x8192x128: launched outside
    any op, so no tensor sizes and no bytes, and it was left off the roofline. Given the call's
    q, k, v and output (each moved once: 268 MB) it is placed, compute-side; a kernel whose
    op's sizes gave its bytes keeps them."""
    flops = 4 * 32 * 128 * 8192 * 8193 / 2
    io_bytes = 4 * 32 * 8192 * 128 * 2
    raw = [_record("_gluon_attn_fwd_ws", "aten", 0.8995, launcher="(no torch op)")]
    roofline.annotate(raw, CEILINGS, flops)  # as before: no bytes, not placed
    assert raw[0]["bytes"] is None and raw[0]["roofline"]["bound"] is None
    roofline.annotate(raw, CEILINGS, flops, io_bytes)
    assert raw[0]["bytes"] == io_bytes and raw[0]["bytes_from"] == roofline.IO_BYTES_FROM
    assert raw[0]["roofline"]["bound"] == "compute"
    cudnn = [_record("cudnn_generated_sdpa", "library", 0.0572, 50331648, launcher="aten::_cudnn")]
    roofline.annotate(cudnn, CEILINGS, flops, io_bytes)
    assert cudnn[0]["bytes"] == 50331648 and "bytes_from" not in cudnn[0]


def test_collecting_cudagraph_skip_reasons_leaves_the_logger_as_it_was():
    """Inside, torch's cudagraphs logger answers DEBUG; after, it must answer as before, cache
    included (a stale cache would keep emitting debug records in the timed process)."""
    import logging

    import torch._inductor.cudagraph_utils as cg

    logger = cg.cudagraphs_log
    before = (logger.disabled, logger.level, logger.isEnabledFor(logging.DEBUG))
    with diagnose.cudagraph_skip_reasons() as messages:
        assert logger.isEnabledFor(logging.DEBUG)
        logger.debug("skipping cudagraphs due to a test")
    assert messages == ["skipping cudagraphs due to a test"]
    assert (logger.disabled, logger.level, logger.isEnabledFor(logging.DEBUG)) == before


def test_graph_breaks_read_as_their_reason_and_explanation_not_torchs_whole_message():
    breaks = {
        "Skip calling `torch.compiler.disable()`d function\n  Explanation: Skip calling "
        "function `_launch` (reason: the interpreter runs the kernel outside the graph)\n"
        "  Hint: Remove the `torch.compiler.disable` call\n\n  Developer debug context: x": 2,
        "Unsupported Tensor.item() call": 1,  # torch 2.11's one-line form
    }
    text = diagnose.graph_breaks_text(breaks)
    assert text == (
        "graph breaks (3): Skip calling `torch.compiler.disable()`d function: Skip calling "
        "function `_launch` (reason: the interpreter runs the kernel outside the graph) (x2); "
        "Unsupported Tensor.item() call"
    )


def test_the_attention_rewrite_note_asks_only_where_a_written_out_softmax_attention_remains():
    """Kernel names and source ops as the H200's published maps hold them: naive's fused
    softmax keeps only exp among its ops, and a Llama block's SiLU has exp too; a model whose
    attention already is SDPA, with its projections' mm, gets no note."""

    def kernel(name, *ops):
        return {"name": name, "aten_ops": list(ops)}

    naive = [
        kernel("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT", "aten.bmm"),
        kernel("triton_per_fused__softmax_exp_masked_fill_mul_prepare_softmax_online_0",
               "aten.div", "aten.exp", "aten.mul"),
        kernel("nvjet_sm90_tst_64x512_64x2_1x2_h_bz_coopB_NNT", "aten.bmm"),
    ]  # fmt: skip
    note = diagnose.attention_rewrite({}, naive)
    assert note.startswith("Inductor's fuse_attention rewrite did not fire")
    assert "--pass naive-to-sdpa" in note
    assert "--pass" not in diagnose.attention_rewrite({}, naive, ("mine.py:rewrite",))
    fired = diagnose.attention_rewrite({"inductor": {"fuse_attention": 2}}, naive)
    assert fired == "Inductor's fuse_attention rewrite fired 2 time(s): the pattern became SDPA"
    llama_block = [
        kernel("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT", "aten.mm"),
        kernel("cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16", "aten.expand"),
        kernel("triton_poi_fused__unsafe_view_mul_silu_5", "aten.div", "aten.exp", "aten.neg"),
    ]
    assert diagnose.attention_rewrite({}, llama_block) is None
    # a CPU's fused softmax keeps its amax among the ops
    cpu = [kernel("aten::bmm", "aten.bmm"), kernel("cpp_fused_0", "aten.amax", "aten.exp")]
    assert "did not fire" in diagnose.attention_rewrite({}, cpu)
