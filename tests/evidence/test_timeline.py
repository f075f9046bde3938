"""One forward's memory timeline (evidence/timeline.py): the curve and the tensors live at its
peak from a hand-made allocator history, each named by the op and line that made it, in
compiled output code and in eager code; `compilekit memory` and the run page show it; a CPU
run is refused in one line."""

import json
import os
import shutil
import textwrap

import pytest

from compilekit.evidence import timeline
from compilekit.report import memoryview, pages

MB = 2**20
OUTPUT_CODE = """\
from torch._inductor.runtime import triton_heuristics

def call(args):
    arg0_1, arg1_1, arg2_1 = args
    buf0 = empty_strided_cuda((64, 64), (64, 1), torch.float32)
    # Topologically Sorted Source Nodes: [fc1], Original ATen: [aten.mm]
    extern_kernels.mm(arg0_1, arg1_1, out=buf0)
    buf1 = empty_strided_cuda((64, 64), (64, 1), torch.float32)
    triton_poi_fused_gelu_0.run(buf0, buf1, 4096, stream=stream0)
    buf2 = empty_strided_cuda((64, 64), (64, 1), torch.float32)
    extern_kernels.mm(buf1, arg2_1, out=buf2)
    return (buf2, )
"""


def _line(n, code):
    return {"file": "/home/u/model.py", "line": n, "code": code}


PROVENANCE = {  # provenance_index's shape: per key, its call sites in order
    "mm": [
        {"aten_ops": ["aten.mm"], "origin_lines": [_line(10, "x = self.fc1(x)")]},
        {"aten_ops": ["aten.mm"], "origin_lines": [_line(12, "x = self.fc2(x)")]},
    ],
    "triton_poi_fused_gelu_0": [
        {"aten_ops": ["aten.gelu"], "origin_lines": [_line(11, "x = gelu(x)")]}
    ],
}


def _ev(action, addr, size, frames=()):
    return {"action": action, "addr": addr, "size": size, "frames": list(frames)}


def test_the_curve_peaks_where_most_is_live_and_names_only_what_is_live_there():
    events = [
        _ev("segment_alloc", 0, 20 * MB),
        _ev("alloc", 1, 4 * MB),
        _ev("alloc", 2, 8 * MB),
        _ev("free_requested", 1, 4 * MB),  # not yet reusable: still counted
        _ev("free_completed", 1, 4 * MB),
        _ev("alloc", 3, 6 * MB),  # the peak: 2 and 3 live, 14 MiB beside the 10 before
        _ev("free_completed", 3, 6 * MB),
        _ev("free_completed", 2, 8 * MB),
        _ev("segment_free", 0, 20 * MB),
    ]
    found = timeline.summarize(events, {"allocated": 10 * MB, "reserved": 12 * MB}, [], {})
    assert found["peak_allocated_mb"] == 24
    assert found["peak_reserved_mb"] == 32
    assert found["peak_event"] == 6
    assert [t["mb"] for t in found["largest_at_peak"]] == [8, 6]
    assert found["live_at_peak_mb"] == 14
    assert found["points"][0][1:] == [10, 12] and found["points"][-1][1:] == [10, 12]


@pytest.mark.parametrize("form", ["function", "Runner method"])
def test_a_compiled_forwards_buffers_are_named_by_the_kernel_that_writes_them(tmp_path, form):
    code = tmp_path / "cabc123.py"
    if form == "function":
        code.write_text(OUTPUT_CODE)
    else:  # graph partitions: the call is Runner's method, its body one level deeper
        body = OUTPUT_CODE.split("def call(args):\n")[1]
        head = "class Runner:\n    def call(self, args):\n"
        code.write_text(OUTPUT_CODE.split("def call")[0] + head + textwrap.indent(body, "    "))

    def made_at(buf):  # from the frame of the line that allocates buf
        lines = code.read_text().splitlines()
        line = next(i + 1 for i, t in enumerate(lines) if t.strip().startswith(f"{buf} = "))
        return timeline.site(
            [{"filename": str(code), "line": line, "name": "call"}], PROVENANCE, {}
        )

    fc1, gelu, fc2 = made_at("buf0"), made_at("buf1"), made_at("buf2")
    assert (fc1["op"], fc1["line"]) == ("aten.mm", 10)
    assert (gelu["op"], gelu["line"]) == ("aten.gelu", 11)
    # the second mm of the output code is the graph's second mm site
    assert (fc2["op"], fc2["line"], fc2["code"]) == ("aten.mm", 12, "x = self.fc2(x)")


def test_an_eager_tensor_is_named_by_the_users_innermost_line_and_the_op_mapped_there(tmp_path):
    model = tmp_path / "model.py"
    model.write_text("import torch\n\n\ndef forward(x):\n    return torch.softmax(x, -1)\n")
    import torch

    frames = [
        {"filename": torch.__file__, "line": 1, "name": "softmax"},  # torch's own: skipped
        {"filename": str(model), "line": 5, "name": "forward"},
    ]
    ops = {(str(model), 5): "aten._softmax"}
    found = timeline.site(frames, {}, ops)
    assert (found["op"], found["line"], found["code"]) == (
        "aten._softmax", 5, "return torch.softmax(x, -1)",
    )  # fmt: skip


def test_memory_refuses_a_cpu_run_in_one_line_and_shows_a_cuda_runs_timeline(
    run_cell, cli, tmp_path
):
    cpu_run = run_cell("naive", "eager").run_dir
    refused = cli("memory", cpu_run)
    assert refused.returncode == 2
    assert refused.stderr.count("\n") == 1 and "--device cuda" in refused.stderr
    # a CUDA run's files, on this CPU: its result marked cuda and a timeline beside it
    run = tmp_path / "cuda_run"
    shutil.copytree(cpu_run, run)
    result = json.loads((run / "result.json").read_text())
    result["device"] = "cuda"
    (run / "result.json").write_text(json.dumps(result))
    missing = cli("memory", str(run))
    assert missing.returncode == 2 and "no memory timeline" in missing.stderr
    events = [_ev("alloc", 1, 3 * MB, [{"filename": "/nowhere.py", "line": 1, "name": "f"}])]
    found = timeline.summarize(events, {"allocated": 0, "reserved": 4 * MB}, [], {})
    (run / timeline.TIMELINE).write_text(json.dumps(found))
    shown = cli("memory", str(run))
    assert shown.returncode == 0, shown.stderr
    assert "peak 3.0 MiB allocated" in shown.stdout and "snapshot: not here" in shown.stdout
    (run / timeline.SNAPSHOT).write_bytes(b"")  # as a CUDA cell leaves it
    assert "open it in https://pytorch.org/memory_viz" in cli("memory", str(run)).stdout
    page = open(pages.run_page(str(run))).read()
    assert "Memory over one forward" in page and "<polyline" in page


def test_the_curve_is_drawn_to_scale():
    svg = memoryview.timeline_svg([[0, 0.0, 10.0], [2, 10.0, 10.0]], width=140, height=130)
    allocated = svg.split('stroke="#1f77b4"')[1].split('points="')[1].split('"')[0]
    assert allocated.split() == ["40.0,110.0", "130.0,10.0"]  # 0 at the foot, the top at 10


def test_inductors_own_output_code_names_the_bmm_that_writes_each_buffer():
    """The H200's published output code of naive default (torch 2.11: Runner.call, the
    scores' buffer reused by the fused softmax): both buffers it allocates are bmm outputs,
    the first and the second bmm call."""
    from tests.conftest import ROOT

    path = os.path.join(ROOT, "experiments", "results", "h200", "blog_part3",
                        "naive__default__8x16x1024x64__bfloat16__cuda", "output_code_graph0.py")  # fmt: skip
    lines = open(path).read().splitlines()
    allocs = [i + 1 for i, t in enumerate(lines) if timeline.WRAPPER_ALLOC_RE.match(t)]
    assert [timeline.wrapper_call(path, n) for n in allocs] == [("bmm", 0), ("bmm", 1)]
