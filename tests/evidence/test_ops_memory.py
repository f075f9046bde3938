"""The op cost matrix's memory column: what an op allocates shows, in MiB per forward, measured
in a profile of its own."""

import pytest
import torch

from compilekit.evidence import opcost, profiling


def test_an_op_that_allocates_a_known_tensor_shows_its_bytes(tmp_path):
    def forward(x):
        scratch = torch.full((1 << 20,), 2.0)  # 4 MiB of float32 per call
        return x * scratch[: x.numel()].view_as(x)

    x = torch.ones(4, 4)
    prof = profiling.run_profiler(forward, (x,), "fwd", "cpu", str(tmp_path))
    rows = opcost.op_table(prof, "cpu", opcost.memory_profile(forward, (x,), "fwd", "cpu"))
    by_name = {r["name"]: r for r in rows}
    assert abs(by_name["aten::empty"]["allocated_mb"] - 4.0) < 0.01
    assert by_name["aten::full"]["calls_per_forward"] == 1
    assert abs(by_name["aten::mul"]["allocated_mb"] - 64 / 2**20) < 1e-6  # its 4x4 output


def test_a_failed_memory_profile_leaves_the_cell_and_its_time_columns(tmp_path, monkeypatch):
    """The memory session is evidence beside the figures: where it fails, the cell stays ok,
    the op table keeps its times, and the run says why the memory column is missing."""
    import json

    from compilekit.evidence import opcost
    from compilekit.launch import cell
    from compilekit.model.result import for_cell
    from compilekit.model.spec import Cell, parse_shape

    def refuse(*args):
        raise RuntimeError("profile_memory refused")

    monkeypatch.setattr(opcost, "memory_profile", refuse)
    monkeypatch.delenv("COMPILEKIT_GPU_LOCK", raising=False)
    eager = Cell("naive", "eager", parse_shape("1x2x64x16"), "float32", "cpu")
    result = for_cell(eager)
    cell.run_measure(eager, str(tmp_path), str(tmp_path), result)
    assert result.status == "ok"
    assert result.memory_note.endswith("(RuntimeError: profile_memory refused)")
    with open(tmp_path / "ops.json") as f:
        rows = json.load(f)
    assert rows and all("allocated_mb" not in r and "self_cpu_ms" in r for r in rows)


def test_the_costliest_ops_by_time_and_memory_are_on_the_page_and_in_the_report(
    tmp_path, monkeypatch
):
    """A measured cell's page has its ops ranked by time and by memory, and a sweep's
    REPORT.md names each cell's costliest ops both ways."""
    import json
    import re

    from compilekit.launch import cell
    from compilekit.model.result import for_cell
    from compilekit.model.spec import Cell, parse_shape
    from compilekit.report import pages, sweepreport

    monkeypatch.delenv("COMPILEKIT_GPU_LOCK", raising=False)
    eager = Cell("naive", "eager", parse_shape("1x2x64x16"), "float32", "cpu")
    run_dir = tmp_path / eager.label()
    run_dir.mkdir()
    result = for_cell(eager)
    cell.run_measure(eager, str(run_dir), str(tmp_path / "cache"), result)
    result.status = "ok"
    result.save(str(run_dir))
    assert json.loads((run_dir / "ops.json").read_text())  # the cell's own; then ops whose
    # order by time is not their order by memory
    rows = [
        {"name": f"aten::op{i}", "calls_per_forward": 1, "self_device_ms": 0.0, "device_ms": 0.0,
         "self_cpu_ms": ms, "share": ms / 10, "allocated_mb": mb}
        for i, (ms, mb) in enumerate([(4.0, 1.0), (3.0, 0.5), (2.0, 8.0), (1.0, 4.0)])
    ]  # fmt: skip
    (run_dir / "ops.json").write_text(json.dumps(rows))
    slowest, biggest = "aten::op0", "aten::op2"
    page = open(pages.run_page(str(run_dir))).read()
    # the page's own tables (its source views show this file, escaped)
    by_time = page.split('<table class="ops small" id="ops-time">')[1].split("</table>")[0]
    by_memory = page.split('<table class="ops small" id="ops-memory">')[1].split("</table>")[0]
    first = re.compile(r'<td class="mono">([^<]+)</td>')
    assert first.search(by_time)[1] == slowest and first.search(by_memory)[1] == biggest
    sweepreport.report(str(tmp_path))
    section = (tmp_path / "REPORT.md").read_text().split("## What each op costs")[1]
    line = next(ln for ln in section.splitlines() if ln.startswith("- "))
    times, memory = line.split("; by memory ")
    assert times.split(": by time ")[1].startswith(f"`{slowest}`")
    assert memory.startswith(f"`{biggest}`")
    assert re.findall(r" ([\d.]+) MiB", memory) == ["8", "4", "1"]


class _Profile:
    """What op_table reads of a torch.profiler session: its events."""

    def __init__(self, events):
        self._events = events

    def events(self):
        return self._events


def test_a_compiled_graphs_annotation_is_not_device_time_and_kernels_count_once():
    """On CUDA, Inductor's `## Call CompiledFxGraph` range also shows as a device-side range
    spanning its kernels: it adds no device time of its own. The forward's time is its kernels'
    (1 + 3 ms), each counted once though it also shows in the op that launched it."""
    from torch.autograd import DeviceType
    from torch.autograd.profiler_util import FunctionEvent

    from compilekit.evidence.opcost import op_table

    call = "## Call CompiledFxGraph abc ##"

    def event(id_, name, start, end, device_type=DeviceType.CPU, **kw):
        return FunctionEvent(
            id_, name, 0, start, end, use_device="cuda", device_type=device_type, **kw
        )

    graph = event(1, call, 0, 5000)
    graph.append_kernel("triton_poi_fused_add_0", 0, 1000)
    mm = event(2, "aten::mm", 1000, 2000)
    mm.append_kernel("sm90_gemm", 0, 3000)
    graph.append_cpu_child(mm)
    mm.set_cpu_parent(graph)
    annotation = event(3, call, 0, 4500, DeviceType.CUDA, is_user_annotation=True)
    kernels = [
        event(4, "triton_poi_fused_add_0", 0, 1000, DeviceType.CUDA),
        event(5, "sm90_gemm", 1000, 4000, DeviceType.CUDA),
    ]
    rows = {
        r["name"]: r
        for r in op_table(_Profile([graph, mm, annotation, *kernels]), "cuda", steps=1)
    }
    assert rows[call]["self_device_ms"] == 1.0  # the kernel it launched itself, not its span
    assert [rows[n]["kind"] for n in (call, "aten::mm", "sm90_gemm")] == ["op", "op", "kernel"]
    assert rows["aten::mm"]["self_device_ms"] == rows["sm90_gemm"]["self_device_ms"] == 3.0
    assert rows["sm90_gemm"]["share"] == 0.75 and rows["aten::mm"]["share"] == 0.75
    assert rows["triton_poi_fused_add_0"]["share"] == 0.25


def test_a_kernel_and_the_launch_range_of_its_name_are_two_rows_each_counted_once():
    """Inductor records each Triton launch as a CPU range named after its kernel: the range
    (an op, its self device time the kernel's) and the kernel are two rows, each with the one
    call per forward and the 2 ms the kernel took, not one row of both (2 calls, 4 ms)."""
    from torch.autograd import DeviceType
    from torch.autograd.profiler_util import FunctionEvent

    from compilekit.evidence.opcost import op_table

    name = "triton_per_fused_softmax_0"
    launch = FunctionEvent(1, name, 0, 0, 100, use_device="cuda")
    launch.append_kernel(name, 0, 2000)
    kernel = FunctionEvent(2, name, 0, 100, 2100, use_device="cuda", device_type=DeviceType.CUDA)
    rows = op_table(_Profile([launch, kernel]), "cuda", steps=1)
    assert sorted(r["kind"] for r in rows) == ["kernel", "op"]
    for r in rows:
        assert (r["name"], r["calls_per_forward"], r["self_device_ms"]) == (name, 1, 2.0), r
        assert r["share"] == 1.0


CUDA_ROWS = [  # an op and its one kernel share their time; so do a GEMM op and its two kernels
    ("aten::_cudnn_attention_forward", 7.79, 1.04, "op"),
    ("cudnn_generated_fort_native_sdpa", 7.79, 0.0, "kernel"),
    ("aten::mm", 4.28, 3.40, "op"),
    ("nvjet_sm90_tst_64x32", 2.23, 0.0, "kernel"),
    ("nvjet_sm90_tst_128x32", 1.67, 0.0, "kernel"),
    ("aten::copy_", 0.0, 0.20, "op"),
]


@pytest.mark.parametrize("with_kind", [True, False], ids=["kind", "written-before-kind"])
def test_a_cuda_cells_report_line_names_kernels_only_and_the_table_marks_each_kind(
    tmp_path, with_kind
):
    """On CUDA an op's self time holds the kernels it launched: REPORT.md's line names the
    kernels (no time twice), and `compilekit ops` marks each row op or kernel; an ops.json
    written before rows carried a kind gets its kinds from its times."""
    import json

    from compilekit.report import opsview

    rows = [
        {"name": n, "calls_per_forward": 1, "self_device_ms": dev, "device_ms": dev,
         "self_cpu_ms": cpu, "share": dev / 11.69, **({"kind": k} if with_kind else {})}
        for n, dev, cpu, k in CUDA_ROWS
    ]  # fmt: skip
    (tmp_path / "ops.json").write_text(json.dumps(rows))
    line = opsview.summary_line(str(tmp_path), cuda=True)
    if with_kind:
        assert line == (
            "kernels by time `cudnn_generated_fort_native_sdpa` 7.79 ms, "
            "`nvjet_sm90_tst_64x32` 2.23 ms, `nvjet_sm90_tst_128x32` 1.67 ms"
        )
    else:  # such a file's Inductor kernels share a row with their launches: the line it had
        assert line == (
            "by time `aten::_cudnn_attention_forward` 7.79 ms, "
            "`cudnn_generated_fort_native_sdpa` 7.79 ms, `aten::mm` 4.28 ms"
        )
    ranked = opsview.ops_rows(str(tmp_path))
    assert {r["name"]: r["kind"] for r in ranked} == {n: k for n, _, _, k in CUDA_ROWS}
    table = opsview.table(ranked, True, None).splitlines()
    assert table[0].split()[:3] == ["op", "kind", "calls/fwd"]
    assert table[2].split()[:2] == ["aten::_cudnn_attention_forward", "op"]
    assert table[3].split()[:2] == ["cudnn_generated_fort_native_sdpa", "kernel"]
    # `compilekit ops --kind kernel|op`: one kind's rows; another word is one line, exit 2
    from compilekit.model.errors import UserError
    from compilekit.model.result import for_cell
    from compilekit.model.spec import Cell, parse_shape

    for_cell(Cell("sdpa", "eager", parse_shape("1x2x64x16"), "bfloat16", "cuda")).save(
        str(tmp_path)
    )
    for only, names in (("kernel", [n for n, *_, k in CUDA_ROWS if k == "kernel"]),
                        ("op", [n for n, *_, k in CUDA_ROWS if k == "op"])):  # fmt: skip
        shown = opsview.ops_view(str(tmp_path), only=only).splitlines()[4:]
        assert sorted(
            ln.split()[0] for ln in shown if ln.strip() and not ln.startswith("peak")
        ) == sorted(names)
    with pytest.raises(UserError, match="choose one of op, kernel"):
        opsview.ops_view(str(tmp_path), only="kernels")
    # --top: that many rows, and a count below one is refused (-5 once showed all but five)
    shown = opsview.ops_view(str(tmp_path), top=2).splitlines()[4:]
    assert len([ln for ln in shown if ln.strip() and not ln.startswith("peak")]) == 2
    for top in (0, -5):
        with pytest.raises(UserError, match="1 or more"):
            opsview.ops_view(str(tmp_path), top=top)
