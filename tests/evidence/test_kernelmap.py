"""The kernel map: pure functions on inline text, then real CPU runs mapped to source lines."""

import json
import os

import pytest

from compilekit.compile import capture
from compilekit.evidence import frames, kernelmap
from tests.conftest import CPU_SHAPE, ROOT

TRITON_OUTPUT_CODE = """
triton_per_fused__softmax_masked_fill_mul_0 = async_compile.triton('triton_per_fused__softmax_masked_fill_mul_0', '''
import triton
@triton.jit
def triton_per_fused__softmax_masked_fill_mul_0(in_ptr0, out_ptr2, xnumel, r0_numel):
    # Topologically Sorted Source Nodes: [scores_1, scores_2, attn], Original ATen: [aten.mul, aten.masked_fill, aten._softmax]
    pass
''', device_str='cuda')

cpp_fused_add_1 = async_compile.cpp_pybinding(['const float*', 'float*'], r'''
extern "C" void kernel(const float* in_ptr0, float* out_ptr0) {}
''')
"""
DYNAMO_GRAPH = """
class GraphModule(torch.nn.Module):
    def forward(self, L_q_: "bf16[8, 16, 1024, 64]"):
         # File: /home/me/attn.py:12 in attention, code: scores = scores * scale
        scores_1: "bf16[8, 16, 1024, 1024]" = scores * 0.125;  scores = None
         # File: /home/me/attn.py:13 in attention, code: scores = scores.masked_fill(mask, -inf)
        scores_2: "bf16[8, 16, 1024, 1024]" = torch.ops.aten.masked_fill.Scalar(scores_1, l_mask_, -inf)
         # File: /home/me/attn.py:14 in attention, code: attn = torch.softmax(scores, dim=-1)
        attn: "bf16[8, 16, 1024, 1024]" = torch.ops.aten._softmax.default(scores_2, -1, False)
"""


def test_split_kernels_finds_triton_and_cpp():
    kernels = capture.split_kernels(TRITON_OUTPUT_CODE)
    assert kernels["triton_per_fused__softmax_masked_fill_mul_0"]["lang"] == "triton"
    assert "@triton.jit" in kernels["triton_per_fused__softmax_masked_fill_mul_0"]["source"]
    assert kernels["cpp_fused_add_1"]["lang"] == "cpp"
    assert 'extern "C"' in kernels["cpp_fused_add_1"]["source"]


def test_comment_fallback_maps_triton_kernel_to_lines():
    sources = {n: k["source"] for n, k in capture.split_kernels(TRITON_OUTPUT_CODE).items()}
    index = kernelmap.comment_index({"dynamo_graph": DYNAMO_GRAPH}, sources)
    rec = index["triton_per_fused__softmax_masked_fill_mul_0"][0]
    assert rec["aten_ops"] == ["aten.mul", "aten.masked_fill", "aten._softmax"]
    # scores_1 is a python-level mul (no torch.ops target), so only the two aten nodes map
    assert [ln["line"] for ln in rec["source_lines"]] == [13, 14]


def test_by_source_line_splits_a_fused_kernel_evenly_and_spares_callers():
    line = lambda n: {"file": "a.py", "line": n, "code": f"line {n}"}
    records = [
        {
            "name": "fused",
            "device_ms": 2.0,
            "calls_per_forward": 1,
            "source_lines": [line(1), line(2), line(9)],
            "origin_lines": [line(1), line(2)],
        },
        # inner line 1, called from line 9 (a caller): only line 1 is charged
        {
            "name": "bmm",
            "device_ms": 1.0,
            "calls_per_forward": 2,
            "source_lines": [line(1), line(9)],
        },
    ]
    rows = {r["line"]: r for r in kernelmap.by_source_line(records)}
    assert rows[1]["attributed_ms"] == pytest.approx(3.0) and rows[1]["kernels"] == [
        "fused",
        "bmm",
    ]
    assert rows[2]["attributed_ms"] == pytest.approx(1.0)
    assert 9 not in rows


def test_depyf_shim_survives_torchs_new_keyword(tmp_path):
    """torch 2.13 calls load_by_key_path(..., set_sys_modules=...): depyf 0.20 alone raises."""
    from torch._inductor.codecache import PyCodeCache

    before = PyCodeCache.load_by_key_path
    with capture.depyf_dump(str(tmp_path)):
        module = PyCodeCache.load("VALUE = 42\n")  # passes set_sys_modules on torch >= 2.13
        assert module.VALUE == 42
    assert PyCodeCache.load_by_key_path == before
    dumped = [f for f in os.listdir(tmp_path) if ".kernel_" in f]
    assert any("VALUE = 42" in open(tmp_path / f).read() for f in dumped)


def test_depyf_dump_keeps_dynamos_bytecode(tmp_path):
    """depyf alone swaps in its decompiled copy of Dynamo's code; where that copy is wrong the
    capture compile breaks. The dump must be written and the code that runs be Dynamo's."""
    import torch
    from depyf.explain.enable_debugging import DebuggableHook
    from torch._dynamo.eval_frame import _debug_get_cache_entry_list

    def scaled(x):
        return torch.relu(x) * 2

    before = DebuggableHook.__call__
    torch._dynamo.reset()
    with capture.depyf_dump(str(tmp_path)):
        compiled = torch.compile(scaled, backend="eager")
        x = torch.randn(8)
        assert torch.equal(compiled(x), torch.relu(x) * 2)
        running = _debug_get_cache_entry_list(scaled.__code__)[0].code
    torch._dynamo.reset()
    assert DebuggableHook.__call__ is before
    assert running.co_filename == __file__  # not depyf's __transformed_code file
    files = os.listdir(tmp_path)
    assert any(f.startswith("__transformed_code_") and "scaled" in f for f in files), files
    assert any(f.startswith("full_code_for_scaled") for f in files), files


def test_the_capture_recompile_builds_no_kernel_again(run_cell, cache_root):
    """The capture recompile numbers its graphs as the cold compile did, so on the CPU its C++
    kernels (whose profiler names carry the graph's number) are the cold compile's, from the
    kernel cache: the cell's Inductor cache holds each kernel once, not once per compile."""
    import glob
    import re

    from compilekit.launch import cache
    from compilekit.model.spec import Cell, parse_shape
    from tests.conftest import SMALL_SHAPE

    assert run_cell("naive", "default").status == "ok"
    cell = Cell("naive", "default", parse_shape(SMALL_SHAPE), "float32", "cpu")
    inductor = os.path.join(cache.folder(cell, cache_root), "inductor")
    sources = [open(p).read() for p in glob.glob(f"{inductor}/**/*.main.cpp", recursive=True)]
    assert sources and all("graph_0_cpp_fused" in s for s in sources), len(sources)
    assert len({re.sub(r"graph_\d+_", "", s) for s in sources}) == len(sources)


def _line_of(path, needle):
    with open(path) as f:
        return next(i for i, text in enumerate(f, 1) if needle in text)


def _kernels(result):
    with open(os.path.join(result.run_dir, "kernels.json")) as f:
        return json.load(f)


def test_naive_default_maps_fused_kernel_to_scale_mask_softmax(run_cell):
    result = run_cell("naive", "default", shape=CPU_SHAPE)
    kmap = _kernels(result)
    naive = os.path.join(ROOT, "variants", "naive.py")
    wanted = {
        _line_of(naive, "scores * (1.0"),
        _line_of(naive, "masked_fill(mask"),
        _line_of(naive, "torch.softmax("),
    }
    fused = [k for k in kmap["kernels"] if k["kind"] == "generated"]
    assert len(fused) == 1 and fused[0]["name"].startswith("cpp_fused")
    lines = {ln["line"] for ln in fused[0]["source_lines"] if ln["file"].endswith("naive.py")}
    assert wanted <= lines
    assert fused[0]["source_via"] == "inductor provenance"
    assert "did not fire" in result.attention_rewrite  # DESIGN: naive is not rewritten to SDPA
    assert "--pass naive-to-sdpa" in result.attention_rewrite  # and the way to have it
    assert "aten.amax" in fused[0]["aten_ops"]
    assert os.path.isfile(os.path.join(result.run_dir, fused[0]["source_file"]))
    # the two matmuls are extern calls, each mapped to its own line
    externs = sorted(
        (k for k in kmap["kernels"] if k["kind"] == "extern"),
        key=lambda k: k["launcher_index"] if "launcher_index" in k else 0,
    )
    extern_lines = sorted(k["source_lines"][0]["line"] for k in externs)
    assert extern_lines == sorted(
        [_line_of(naive, "torch.matmul(q"), _line_of(naive, "torch.matmul(attn")]
    )


def test_eager_run_maps_each_op_to_its_line(run_cell):
    result = run_cell("naive", "eager")
    kmap = _kernels(result)
    naive = os.path.join(ROOT, "variants", "naive.py")
    lines = {k["name"]: {ln["line"] for ln in k["source_lines"]} for k in kmap["kernels"]}
    assert _line_of(naive, "masked_fill(mask") in lines["aten::masked_fill"]
    assert _line_of(naive, "torch.softmax(") in lines["aten::softmax"]
    charged = {r["line"] for r in kmap["by_source_line"]}
    assert {_line_of(naive, "torch.matmul(q"), _line_of(naive, "torch.matmul(attn")} <= charged


def test_kernel_times_add_up_to_the_forward(run_cell):
    """The map accounts for the forward's launches, and they fill it: in the trace of the same
    profiled steps, the map's total (each kernel's median times its calls) matches the launches
    of each step, and those cover the step (on CPU the kernels are the forward's work, 0.94 of
    it on a quiet machine). Coverage is judged on the quietest step: on a 2-core machine shared
    with anything else, the steps' median read 15.2 ms against 11.5 ms of kernels (CI,
    2026-12-02), while a kernel the map lost leaves every step short."""
    result = run_cell("naive", "default", shape=CPU_SHAPE)
    kmap = _kernels(result)
    with open(os.path.join(result.run_dir, "trace.json")) as f:
        events = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]
    steps = [e for e in events if e["name"] == "naive/default"]
    launchers = {k["launcher"] for k in kmap["kernels"]}
    launches = [e for e in events if e["name"] in launchers]
    assert len(steps) == 5 and len(launches) == 5 * kmap["kernels_per_forward"]
    per_step_ms = [
        sum(e["dur"] for e in launches if s["ts"] <= e["ts"] <= s["ts"] + s["dur"]) / 1e3
        for s in steps
    ]
    total = sum(k["device_ms"] * k["calls_per_forward"] for k in kmap["kernels"])
    # the kernels' medians add up to a total among the steps' own (not at their median: on
    # a 2-core machine one slow step moves the median of the sums by more than 10%)
    assert 0.95 * min(per_step_ms) <= total <= 1.05 * max(per_step_ms), (total, per_step_ms)
    covered = [ms / (s["dur"] / 1e3) for ms, s in zip(per_step_ms, steps)]
    assert 0.85 <= max(covered) <= 1.0, covered


def test_user_variant_maps_to_its_own_lines(run_cell, user_variant):
    path = user_variant
    result = run_cell(f"{path}:capped_attention", "default")
    kmap = _kernels(result)
    tanh_line = _line_of(path, "torch.tanh")
    mapped = {
        (os.path.basename(ln["file"]), ln["line"])
        for k in kmap["kernels"]
        for ln in k["source_lines"]
    }
    assert ("capped.py", tanh_line) in mapped
    fused = next(
        k for k in kmap["kernels"] if any(ln["line"] == tanh_line for ln in k["source_lines"])
    )
    assert "aten.tanh" in fused["aten_ops"]
    rows = {r["line"]: r for r in kmap["by_source_line"]}
    assert rows[tanh_line]["attributed_ms"] > 0


def test_kernels_cli_table_one_kernel_and_diff(run_cell, cli):
    default, autotune = run_cell("naive", "default"), run_cell("naive", "max-autotune")
    proc = cli("kernels", default.run_dir)
    assert proc.returncode == 0, proc.stderr
    assert "cpp_fused" in proc.stdout and "naive.py:" in proc.stdout
    # the fused kernel's GB/s rests on the output code's bytes, not the profiler's: marked, and
    # the mark says where they came from
    fused_row = next(line for line in proc.stdout.splitlines() if line.startswith("cpp_fused"))
    assert "[a]" in fused_row and "[b]" not in proc.stdout
    assert "\n[a] bytes from its call in Inductor's output code" in proc.stdout
    assert f"\n{default.roofline}\n" in proc.stdout  # the split over the bound column's classes
    name = next(k["name"] for k in _kernels(default)["kernels"] if k["kind"] == "generated")
    proc = cli("kernels", default.run_dir, "--kernel", name)
    assert proc.returncode == 0 and 'extern "C"' in proc.stdout and "softmax" in proc.stdout
    proc = cli("diff", default.run_dir, autotune.run_dir)
    assert proc.returncode == 0, proc.stderr
    assert "naive/default" in proc.stdout and "naive/max-autotune" in proc.stdout


def test_bad_run_dir_is_one_line(cli, tmp_path):
    proc = cli("kernels", str(tmp_path / "nowhere"))
    assert proc.returncode == 2 and "not a run directory" in proc.stderr
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "result.json").write_text(json.dumps({"format_version": 1}))
    proc = cli("kernels", str(tmp_path / "old"))
    assert proc.returncode == 2 and "another compilekit format" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def _stack(line, code):
    return f'  File "/home/me/attn.py", line {line}, in attention\n    {code}\n'


GRAPH_WITH_PROVENANCE = {
    "post_grad_graph": (
        '        bmm: "bf16[128, 1024, 1024]" = torch.ops.aten.bmm.default(a, b)\n'
        '        amax: "f32[8, 16, 1024, 1]" = torch.ops.aten.amax.default(x, [-1], True)\n'
        '        bmm_1: "bf16[128, 1024, 64]" = torch.ops.aten.bmm.default(c, d)\n'
    ),
    "node_mappings": {
        "cppCodeToPost": {
            "extern_kernels.bmm:1": ["bmm"],
            "triton_per_fused_softmax_0:2": ["amax"],
            "extern_kernels.bmm:3": ["bmm_1"],
        }
    },
    "kernel_stack_traces": {
        "extern_kernels.bmm:1": [_stack(5, "s = q @ k.T")],
        "triton_per_fused_softmax_0:2": [_stack(6, "p = s.softmax(-1)")],
        "extern_kernels.bmm:3": [_stack(7, "return p @ v")],
    },
}


def _forward(launcher_a, launcher_b, triton_launcher):
    kernel = lambda name, launcher, index: {
        "name": name,
        "launcher": launcher,
        "launcher_index": index,
        "calls_per_forward": 1,
        "device_ms": 1.0,
    }
    return {
        "forward_device_ms": 3.0,
        "kernels": [
            kernel("nvjet_gemm_A", launcher_a, 0),
            kernel("triton_per_fused_softmax_0", triton_launcher, 0),
            kernel("nvjet_gemm_B", launcher_b, 1 if launcher_b == launcher_a else 0),
        ],
    }


@pytest.mark.parametrize(
    "launchers",
    [
        ("aten::bmm", "aten::bmm", "triton_per_fused_softmax_0"),  # eager launch: matched by op
        (
            "## Call CompiledFxGraph abc",
            "## Call CompiledFxGraph abc",  # CUDA-graph replay
            "## Call CompiledFxGraph abc",
        ),
    ],
)
def test_each_bmm_maps_to_its_own_line(launchers, tmp_path):
    records = kernelmap.build_map(
        _forward(*launchers), {"0/0": GRAPH_WITH_PROVENANCE}, {}, str(tmp_path), compiled=True
    )
    lines = {r["name"]: [ln["line"] for ln in r["source_lines"]] for r in records}
    assert lines == {"nvjet_gemm_A": [5], "triton_per_fused_softmax_0": [6], "nvjet_gemm_B": [7]}
    kinds = {r["name"]: r["kind"] for r in records}
    assert kinds["nvjet_gemm_A"] == "extern" and kinds["triton_per_fused_softmax_0"] == "generated"
    assert next(r for r in records if r["name"] == "triton_per_fused_softmax_0")["aten_ops"] == [
        "aten.amax"
    ]


def test_a_replays_kernels_take_call_sites_of_their_own_class_only(tmp_path):
    """Under a CUDA-graph replay the n-th library kernel took the n-th unused call site: the
    input copies launched before the replay, and a library's helper kernel, took a GEMM's
    site, and every later GEMM its neighbour's line (a BERT's MLP GEMMs then sat on the
    attention's projections)."""
    replay = "## Call CompiledFxGraph abc"
    kernel = lambda name, launcher: {"name": name, "launcher": launcher, "launcher_index": 0,  # noqa: E731
                                     "calls_per_forward": 1, "device_ms": 1.0}  # fmt: skip
    forward = {
        "forward_device_ms": 5.0,
        "kernels": [
            kernel("void at::native::multi_tensor_apply_kernel", "aten::_foreach_copy_"),
            kernel("nvjet_gemm_A", replay),
            kernel("void cub::DeviceReduceKernel", replay),
            kernel("triton_per_fused_softmax_0", replay),
            kernel("nvjet_gemm_B", replay),
        ],
    }
    records = kernelmap.build_map(forward, {"0/0": GRAPH_WITH_PROVENANCE}, {}, str(tmp_path), True)
    lines = {r["name"]: [ln["line"] for ln in r["source_lines"]] for r in records}
    assert lines["nvjet_gemm_A"] == [5] and lines["nvjet_gemm_B"] == [7]
    assert lines["void at::native::multi_tensor_apply_kernel"] == []
    assert lines["void cub::DeviceReduceKernel"] == []


# the graph's wrapper: q, k, v [128, 1024, 64] and the scores [128, 1024, 1024], bf16
REPLAYED_CODE = """
def call(args):
    buf0 = empty_strided_cuda((128, 1024, 1024), (1048576, 1024, 1), torch.bfloat16)
    # [Provenance debug handles] extern_kernels.bmm:1
    extern_kernels.bmm(arg0_1, arg1_1, out=buf0)
    # [Provenance debug handles] triton_per_fused_softmax_0:2
    triton_per_fused_softmax_0.run(buf0, 134217728, stream=stream0)
    buf1 = empty_strided_cuda((128, 1024, 64), (65536, 64, 1), torch.bfloat16)
    # [Provenance debug handles] extern_kernels.bmm:3
    extern_kernels.bmm(buf0, arg2_1, out=buf1)
def get_args():
    arg0_1 = rand_strided((128, 1024, 64), (65536, 64, 1), device='cuda:0', dtype=torch.bfloat16)
    arg1_1 = rand_strided((128, 64, 1024), (65536, 1, 64), device='cuda:0', dtype=torch.bfloat16)
    arg2_1 = rand_strided((128, 1024, 64), (65536, 64, 1), device='cuda:0', dtype=torch.bfloat16)
"""


def test_a_replays_kernels_take_their_bytes_from_the_output_code(tmp_path):
    """A CUDA-graph replay's kernels record no tensors: each takes its call site's bytes (and
    a matmul its FLOPs) from the wrapper, and says so; a launch whose profiled bytes agree with
    its call keeps the profiler's figures, and its FLOPs."""
    from compilekit.evidence import codecost

    graph = {**GRAPH_WITH_PROVENANCE, "output_code": REPLAYED_CODE}
    replay = _forward(*["## Call CompiledFxGraph abc"] * 3)
    records = {r["name"]: r for r in kernelmap.build_map(replay, {"0/0": graph}, {}, "", True)}
    qkv, scores = 128 * 1024 * 64 * 2, 128 * 1024 * 1024 * 2
    gemm_b, softmax = records["nvjet_gemm_B"], records["triton_per_fused_softmax_0"]
    assert gemm_b["bytes"] == scores + 2 * qkv and gemm_b["flops"] == 2 * 128 * 1024 * 1024 * 64
    assert gemm_b["bytes_from"] == codecost.CODE_BYTES_FROM
    assert gemm_b["flops_from"] == codecost.CODE_FLOPS_FROM
    assert softmax["bytes"] == scores and softmax["flops"] is None and "flops_from" not in softmax
    launched = _forward("aten::bmm", "aten::bmm", "triton_per_fused_softmax_0")
    launched["kernels"][0].update(bytes=scores + 2 * qkv, flops=11)  # the profiler's
    first = kernelmap.build_map(launched, {"0/0": graph}, {}, "", True)[0]
    assert (first["bytes"], first["flops"]) == (scores + 2 * qkv, 11)
    assert "bytes_from" not in first and "flops_from" not in first


def _event(name, device, start, end, children=(), kernels=(), annotation=False):
    from types import SimpleNamespace

    from torch.autograd import DeviceType

    return SimpleNamespace(
        name=name,
        device_type=DeviceType.CUDA if device == "cuda" else DeviceType.CPU,
        time_range=SimpleNamespace(start=start, end=end),
        cpu_children=list(children),
        kernels=list(kernels),
        is_user_annotation=annotation,
        cpu_time_total=end - start,
        input_shapes=[],
        flops=0,
    )


def test_a_kernel_launched_by_no_torch_op_is_still_counted():
    """triton-flash's eager fast path launches its compiled kernel without a torch op, so no CPU
    op lists the kernel: on the H200 the map came out empty and the cell read 'GPU busy 0%,
    host-bound' for a 57 us kernel. The step's GPU-side range still holds it. A kernel an op did
    claim (the bmm's) is not counted twice."""
    from types import SimpleNamespace

    from compilekit.evidence import profiling

    label, events = "triton-flash/eager", []
    for step in range(2):
        t = 1000.0 * step
        gemm = SimpleNamespace(name="sm90_gemm", duration=5.0)
        bmm = _event("aten::bmm", "cpu", t + 1, t + 4, kernels=[gemm])
        launch = _event("cuLaunchKernelEx", "cpu", t + 5, t + 9)
        events += [
            _event(label, "cpu", t, t + 20, children=[bmm, launch]),
            _event(label, "cuda", t + 30, t + 100, annotation=True),  # the step's GPU range
            _event("sm90_gemm", "cuda", t + 30, t + 35),
            _event("_attn_fwd", "cuda", t + 36, t + 93),
            _event("ProfilerStep#1", "cuda", t + 30, t + 100, annotation=True),
        ]
    events.append(_event("_attn_fwd", "cuda", 5000, 5057))  # outside every step: not counted
    forward = profiling.forward_kernels(SimpleNamespace(events=lambda: events), label, "cuda")
    by_name = {k["name"]: k for k in forward["kernels"]}
    assert by_name["_attn_fwd"]["launcher"] == profiling.NO_OP
    assert by_name["_attn_fwd"]["calls_per_forward"] == 1.0
    assert abs(by_name["_attn_fwd"]["device_ms"] - 0.057) < 1e-9
    assert by_name["sm90_gemm"]["launcher"] == "aten::bmm"
    assert forward["kernels_per_forward"] == 2.0
    assert abs(forward["forward_device_ms"] - 0.062) < 1e-9


def test_an_ops_bytes_and_flops_go_to_its_longest_kernel_only():
    """cuBLAS and cuDNN launch a workspace memset beside their kernel; the H200 map credited the
    0.7 us memset with the op's 50 MB (71 TB/s) and the bmm's 17 GFLOP."""
    from types import SimpleNamespace

    from compilekit.evidence import profiling

    label, events = "sdpa/eager", []
    for step in range(2):
        t = 1000.0 * step
        cudnn = _event(
            "aten::_cudnn_attention_forward",
            "cpu",
            t + 1,
            t + 9,
            kernels=[
                SimpleNamespace(name="Memset (Device)", duration=0.7),
                SimpleNamespace(name="cudnn_sdpa_fprop", duration=57.0),
            ],
        )
        cudnn.input_shapes, cudnn.flops = [[8, 16, 1024, 64]] * 3, 17_196_646_400
        events += [_event(label, "cpu", t, t + 20, children=[cudnn])]
    forward = profiling.forward_kernels(SimpleNamespace(events=lambda: events), label, "cuda", 2)
    by_name = {k["name"]: k for k in forward["kernels"]}
    assert by_name["cudnn_sdpa_fprop"]["bytes"] == 4 * 8 * 16 * 1024 * 64 * 2  # q, k, v, output
    assert by_name["cudnn_sdpa_fprop"]["flops"] == 17_196_646_400
    assert by_name["Memset (Device)"]["bytes"] is None
    assert by_name["Memset (Device)"]["flops"] is None
    # two launches of equal length: the op's bytes are still counted once, on the first
    twice = _event(
        "aten::mm",
        "cpu",
        1,
        9,
        kernels=[SimpleNamespace(name=n, duration=5.0) for n in ("gemm_a", "gemm_b")],
    )
    twice.input_shapes = [[64, 64], [64, 64]]
    events = [_event("mm", "cpu", 0, 20, children=[twice])]
    forward = profiling.forward_kernels(SimpleNamespace(events=lambda: events), "mm", "cuda", 2)
    assert [k["bytes"] for k in forward["kernels"]] == [3 * 64 * 64 * 2, None]


def test_a_replays_gemms_of_one_name_each_take_their_own_call_site():
    """On an H100 under reduce-overhead every kernel of the replayed graph hangs under the one
    `Torch-Compiled Region` op: a BERT's GEMMs, all one cuBLAS name, became one record with
    the first GEMM's site (the query projection) and the forward read 82% attention, 0%
    matmuls. Each launch keeps its place, so the second GEMM takes the graph's second site,
    and cuBLASLt's split-K reduction its own GEMM's, not the next GEMM's."""
    from types import SimpleNamespace

    from compilekit.evidence import profiling

    region, events = "Torch-Compiled Region: 0/0", []
    for step in range(2):
        t = 1000.0 * step
        replay = _event(
            region,
            "cpu",
            t + 1,
            t + 9,
            kernels=[
                SimpleNamespace(name=n, duration=d)
                for n, d in (("nvjet_gemm", 4.0), ("void cublasLt::splitKreduce_kernel", 1.0),
                             ("triton_per_fused_softmax_0", 2.0), ("nvjet_gemm", 6.0),
                             ("triton_per_fused_softmax_0", 3.0))
            ],
        )  # fmt: skip
        events += [_event("bert/reduce-overhead", "cpu", t, t + 20, children=[replay])]
    forward = profiling.forward_kernels(
        SimpleNamespace(events=lambda: events), "bert/reduce-overhead", "cuda", 2
    )
    assert [k["name"] for k in forward["kernels"]].count("nvjet_gemm") == 2
    # the generated softmax kernel is called from two sites of the graph as well
    graph = json.loads(json.dumps(GRAPH_WITH_PROVENANCE))
    graph["node_mappings"]["cppCodeToPost"]["triton_per_fused_softmax_0:4"] = ["amax"]
    graph["kernel_stack_traces"]["triton_per_fused_softmax_0:4"] = [_stack(8, "p2 = s.softmax(-1)")]
    records = kernelmap.build_map(forward, {"0/0": graph}, {}, "", True)
    lines = sorted(
        (r["name"], r["device_ms"], [ln["line"] for ln in r["source_lines"]]) for r in records
    )
    assert lines == [
        ("nvjet_gemm", 0.004, [5]),
        ("nvjet_gemm", 0.006, [7]),
        ("triton_per_fused_softmax_0", 0.002, [6]),
        ("triton_per_fused_softmax_0", 0.003, [8]),
        ("void cublasLt::splitKreduce_kernel", 0.001, [5]),  # its GEMM's call launched it
    ], lines


RAW_KERNEL_FILE = """import triton
import triton.language as tl


@triton.autotune(configs=[triton.Config({})], key=[])
@triton.jit
def _raw_add(x_ptr, n):
    pass


@triton.jit
def _raw_plain(x_ptr):
    pass
"""


class _MissingBackend:
    """A public attribute raises ImportError, as transformers' stand-ins for missing backends
    do."""

    def __getattribute__(self, name):
        if name.startswith("_"):
            return object.__getattribute__(self, name)
        raise ImportError(f"{name}: this needs a library that is not installed")


def test_a_kernel_launched_outside_any_op_maps_to_its_definition(tmp_path, monkeypatch):
    """gluon-flash and triton-flash launch their kernel raw in eager (no torch op: the
    profiler names no launcher, so no op's call stack gives a line): such a kernel maps to its
    @triton.jit definition, autotuned or not, found by the name the profiler gives it."""
    import importlib.util
    import sys

    from compilekit.evidence import eagerlines, profiling

    path = tmp_path / "raw_kernels_mod.py"
    path.write_text(RAW_KERNEL_FILE)
    spec = importlib.util.spec_from_file_location("raw_kernels_mod", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.placeholder = _MissingBackend()  # as transformers leaves for a library not installed
    monkeypatch.setitem(sys.modules, "raw_kernels_mod", module)  # imported for this test only
    definitions = eagerlines.raw_kernel_definitions()
    path = str(path)
    assert definitions["_raw_add"] == [
        {"file": path, "line": 7, "code": "def _raw_add(x_ptr, n):"}
    ]
    assert definitions["_raw_plain"][0]["line"] == 12
    assert not any(f["file"].startswith(os.path.dirname(profiling.__file__))
                   for frames in definitions.values() for f in frames)  # fmt: skip
    forward = {
        "forward_device_ms": 2.0,
        "kernels": [
            {"name": "_raw_add", "launcher": profiling.NO_OP, "calls_per_forward": 1,
             "device_ms": 1.5},
            {"name": "_not_ours", "launcher": profiling.NO_OP, "calls_per_forward": 1,
             "device_ms": 0.5},
        ],
    }  # fmt: skip
    records = kernelmap.build_map(forward, {}, {}, str(tmp_path), False, {}, definitions)
    raw, other = records
    assert raw["source_lines"] == raw["origin_lines"] == definitions["_raw_add"]
    assert raw["source_via"] == "the kernel's definition (launched outside any torch op)"
    assert other["source_lines"] == []  # a kernel of no file this process imported: no line
    assert kernelmap.by_source_line(records)[0]["line"] == 7


def test_launches_of_one_kernel_from_one_line_are_one_row():
    """A model's layers launch one kernel from one source line many times: one row, its calls
    summed, its time the mean per call, its share the sum; another line's launch of the same
    kernel stays its own row, and each line is charged what it was before the merge."""
    stacks = {5: frames.user_frames(_stack(5, "h = x @ w_up")),
              7: frames.user_frames(_stack(7, "y = h @ w_down"))}  # fmt: skip
    times = [(5, 1.0), (5, 2.0), (7, 4.0), (5, 3.0)]  # (line, ms) of each aten::mm launch
    forward = {
        "forward_device_ms": 10.0,
        "kernels": [
            {"name": "nvjet_gemm", "launcher": "aten::mm", "launcher_index": i,
             "calls_per_forward": 1, "device_ms": ms}
            for i, (_, ms) in enumerate(times)
        ],
    }  # fmt: skip
    eager_lines = {("aten::mm", i): stacks[line] for i, (line, _) in enumerate(times)}
    records = kernelmap.build_map(forward, {}, {}, "", False, eager_lines)
    rows = {r["source_lines"][0]["line"]: r for r in records}
    assert len(records) == 2 and rows[5]["calls_per_forward"] == 3
    assert rows[5]["device_ms"] == pytest.approx(2.0) and rows[5]["share"] == pytest.approx(0.6)
    assert rows[7]["calls_per_forward"] == 1 and rows[7]["device_ms"] == pytest.approx(4.0)
    charged = {r["line"]: r["attributed_ms"] for r in kernelmap.by_source_line(records)}
    assert charged == {5: pytest.approx(6.0), 7: pytest.approx(4.0)}


def test_eager_lines_see_inside_composite_ops_under_inference_mode():
    """Inside torch.inference_mode() aten::linear reaches the dispatch mode whole; its
    aten::addmm (the op a GEMM's launch names) must still be recorded at the line that called
    it, as under no_grad: without it, an eager model's GEMMs had no lines there (an H100's
    BERT-base read attention 10% of its time under inference_mode, 49% under no_grad)."""
    import torch

    from compilekit.evidence import eagerlines

    layer = torch.nn.Linear(8, 8).requires_grad_(False)
    x = torch.randn(2, 3, 8)
    found = {}
    for grad in (torch.no_grad, torch.inference_mode):
        with grad():
            lines = eagerlines.eager_source_lines(lambda t: layer(t), (x,))
        found[grad.__name__] = lines.get(("aten::addmm", 0))
    assert found["no_grad"] and found["inference_mode"] == found["no_grad"], found


def test_a_replays_gemms_each_take_their_own_call_site(tmp_path):
    """Under a CUDA-graph replay no op launches a kernel: each launch of a cuBLAS kernel keeps
    its place in the step (stepwindows.unattached), so the n-th GEMM takes the graph's n-th
    GEMM call site. When a kernel name's launches were one record, BERT-base's 60 projections
    all took the query's line and an H100 read it 79% attention, 0% matmuls."""
    from types import SimpleNamespace

    from torch.autograd import DeviceType

    from compilekit.evidence import profiling

    def event(name, start, end, device=DeviceType.CUDA):
        return SimpleNamespace(name=name, device_type=device, kernels=[], cpu_time_total=0,
                               cpu_children=[],
                               time_range=SimpleNamespace(start=start, end=end))  # fmt: skip

    step = event("forward", 0, 100, DeviceType.CPU)
    gemm, big = "nvjet_tst_96x64_bias_TNN", "nvjet_tst_192x128_bias_TNT"
    events = [step, event("forward", 0, 100)] + [
        event(name, t, t + 5) for t, name in ((10, gemm), (20, gemm), (30, big), (40, gemm))
    ]
    forward = profiling.forward_kernels(SimpleNamespace(events=lambda: events), "forward", "cuda")
    assert [(k["name"], k["launcher_index"]) for k in forward["kernels"]] == [
        (gemm, 0), (gemm, 1), (big, 0), (gemm, 2)
    ]  # fmt: skip
    model = "/home/me/modeling_mine.py"
    stacks = {
        f"extern_kernels.addmm:{n}": [f'  File "{model}", line {line}, in forward\n    y = x\n']
        for n, line in ((1, 11), (2, 12), (3, 13), (4, 14))
    }
    graph = {"kernel_stack_traces": stacks, "node_mappings": {}, "post_grad_graph": ""}
    records = kernelmap.build_map(forward, {"g": graph}, {}, str(tmp_path), compiled=True)
    lines = {(r["name"], r["source_lines"][0]["line"]) for r in records}
    assert lines == {(gemm, 11), (gemm, 12), (big, 13), (gemm, 14)}, lines


def test_an_eager_kernel_launched_by_an_op_inside_another_takes_the_outer_ops_line():
    """Out-of-place masked_fill launches its kernels from ops inside it (clone's copy_, then
    masked_fill_), which the eager recording does not see: each takes the line of the op
    around it, counted as the profile counts ops; a launcher with a line of its own keeps it."""
    from compilekit.evidence import profiling

    class Op:
        def __init__(self, name, parent=None):
            self.name, self.cpu_parent = name, parent

    step = Op("naive/eager")
    masked = [Op("aten::masked_fill", step), Op("aten::masked_fill", step)]
    clone = Op("aten::clone", masked[1])
    launches = [("copy_kernel", Op("aten::copy_", clone), 1.0),
                ("fill_kernel", Op("aten::masked_fill_", masked[1]), 1.0),
                ("mm_kernel", Op("aten::mm", step), 1.0)]  # fmt: skip
    profiling._indexed([("other_fill", Op("aten::masked_fill_", masked[0]), 1.0)])  # apart
    found = profiling._indexed(
        [("first_fill", Op("aten::masked_fill_", masked[0]), 1.0)] + launches
    )
    outer = {name: rest[-1] for name, *rest in found}
    assert outer["copy_kernel"] == [["aten::clone", 0], ["aten::masked_fill", 1]]
    assert outer["fill_kernel"] == [["aten::masked_fill", 1]] and outer["mm_kernel"] == []
    line = [{"file": "naive.py", "line": 28, "code": "scores = scores.masked_fill(mask, x)"}]
    own = [{"file": "naive.py", "line": 30, "code": "return attn @ v"}]
    recorded = {("aten::masked_fill", 1): line, ("aten::mm", 0): own}
    copy = {"launcher": "aten::copy_", "launcher_index": 0, "outer": outer["copy_kernel"]}
    site, via = kernelmap.eager_site(copy, recorded, None)
    assert site["source_lines"] == line and "aten::masked_fill, around the launching op" in via
    mm = {"launcher": "aten::mm", "launcher_index": 0, "outer": [["aten::masked_fill", 1]]}
    assert kernelmap.eager_site(mm, recorded, None)[0]["source_lines"] == own
