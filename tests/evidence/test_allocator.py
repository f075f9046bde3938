"""The CUDA caching allocator's figures (evidence/allocator.py): fragmentation from the stats
torch keeps, a CUDA graph's private pool apart from it, and what a CPU cell says instead; the
views that show them (report/memoryview.py)."""

import importlib.util

import pytest

from compilekit.evidence import allocator
from compilekit.model.result import CellResult
from compilekit.report import memoryview

MB = 2**20
STATS = {
    "allocated_bytes.all.peak": 300 * MB,
    "reserved_bytes.all.peak": 400 * MB,
    "inactive_split_bytes.all.peak": 20 * MB,
    "segment.all.peak": 7,
    "num_alloc_retries": 5,
}
# three segments: two of the default pool, one of a CUDA graph's private pool (1, 3)
SEGMENTS = [
    {"segment_pool_id": (0, 0), "total_size": 200 * MB, "allocated_size": 180 * MB},
    {"segment_pool_id": (0, 0), "total_size": 100 * MB, "allocated_size": 60 * MB},
    {"segment_pool_id": (1, 3), "total_size": 100 * MB, "allocated_size": 60 * MB},
]


def test_fragmentation_is_the_share_of_reserved_memory_no_tensor_used():
    figures = allocator.forward_figures(STATS, retries_before=2)
    assert figures["peak_allocated_mb"] == 300 and figures["peak_reserved_mb"] == 400
    assert figures["fragmentation"] == pytest.approx(0.25)  # 100 of 400 MiB unused
    assert figures["inactive_split_mb"] == 20 and figures["segments"] == 7
    assert figures["alloc_retries"] == 3  # the forward's own, not the process's
    assert allocator.fragmentation(0, 0) == 0.0  # nothing reserved: nothing fragmented


def test_a_cuda_graphs_pool_is_counted_apart_from_the_fragmentation():
    pools = allocator.pool_figures(SEGMENTS)
    assert pools == {"reserved_mb": 100, "allocated_mb": 60, "segments": 1, "pools": 1}
    # the default pool's: (300 - 60) of (400 - 100) MiB used
    figures = allocator.forward_figures(STATS, pools=pools)
    assert figures["fragmentation"] == pytest.approx(0.2)
    assert allocator.pool_figures(SEGMENTS[:2]) is None  # no CUDA graph: no pool line


def _result(memory, **fields):
    return CellResult(
        "naive", "reduce-overhead", "8x16x1024x64", "bfloat16", "cuda", status="ok",
        compiled_ms=1.0, eager_ms=2.0, memory=memory, **fields,
    )  # fmt: skip


def test_the_summary_the_ops_table_and_the_report_show_both_sides_and_the_pool():
    graphs = {**allocator.forward_figures(STATS, 0, allocator.pool_figures(SEGMENTS)),
              "cudagraph_pools": allocator.pool_figures(SEGMENTS)}  # fmt: skip
    memory = {
        "what": "one forward per side, each from an emptied cache",
        "held_reserved_mb": 512.0,
        "allocator_conf": "expandable_segments:True",
        "eager": allocator.forward_figures(STATS),
        "compiled": graphs,
    }
    line = memoryview.summary_line(memory)
    assert "eager 300.0/400.0 MiB, 25% fragmented" in line
    assert "compiled 300.0/400.0 MiB, 20% fragmented, 100.0 MiB in CUDA-graph pools" in line
    assert "5 cudaMalloc retries" in line and line.endswith("[expandable_segments:True]")
    table = memoryview.table(memory)
    assert "held after the timed calls: 512.0 MiB reserved" in table
    assert [r[0] for r in memoryview.rows(memory)] == ["eager", "compiled"]
    md = memoryview.section([_result(memory)], lambda r: r.variant)
    row = next(
        line for line in md if line.startswith("| naive [expandable_segments:True] | compiled")
    )
    assert "| 20.0% |" in row and row.endswith("| 100.0 | 1 |")  # the compiled side's 1.0 ms
    eager_row = next(
        line for line in md if line.startswith("| naive [expandable_segments:True] | eager")
    )
    assert eager_row.endswith("| - | 2 |")
    failed = {**memory, "eager": {"error": "OutOfMemoryError: CUDA out of memory"}}
    assert "eager not measured (OutOfMemoryError" in memoryview.summary_line(failed)
    assert [r[0] for r in memoryview.rows(failed)] == ["compiled"]


def test_a_cpu_cell_says_in_one_line_what_it_cannot_measure(tmp_path, monkeypatch):
    from compilekit.launch import cell
    from compilekit.model.result import for_cell
    from compilekit.model.spec import Cell, parse_shape
    from compilekit.report import cellview

    monkeypatch.delenv("COMPILEKIT_GPU_LOCK", raising=False)
    eager = Cell("naive", "eager", parse_shape("1x2x64x16"), "float32", "cpu")
    result = for_cell(eager)
    cell.run_measure(eager, str(tmp_path), str(tmp_path), result)
    assert result.memory == {"note": allocator.CPU_NOTE} and result.peak_memory_mb is None
    assert allocator.CPU_NOTE in cellview.cell_summary(result).splitlines()
    assert memoryview.section([result], str) == ["## Memory", "", f"{allocator.CPU_NOTE}.", ""]


def test_memory_against_batch_is_a_series_per_model_mode_and_allocator(tmp_path):
    """memory.toml's question as data and a plot: the measured side's peaks per batch, one
    series per (model, mode, the rest of the shape, allocator); a lone batch and a CPU cell
    make none."""
    from compilekit.report import plots

    def cell(shape, mode="default", alloc="", peak=100.0):
        side = {**allocator.forward_figures(STATS), "peak_allocated_mb": peak}
        memory = {"eager": side, "compiled": {**side, "peak_reserved_mb": 2 * peak}}
        return CellResult("bert-base", mode, shape, "bfloat16", "cuda", status="ok",
                          compiled_ms=1.0, eager_ms=2.0, memory=memory, alloc=alloc)  # fmt: skip

    results = [
        cell("4x128", peak=400.0), cell("1x128"), cell("16x128", alloc="expandable_segments:True"),
        cell("1x128", alloc="expandable_segments:True", peak=90.0), cell("8x512"),
        CellResult("naive", "default", "1x128", "float32", "cpu", status="ok",
                   memory={"note": allocator.CPU_NOTE}),
    ]  # fmt: skip
    series = memoryview.batch_series(results)
    assert series == {
        "bert-base/default 128": [(1, 100.0, 200.0), (4, 400.0, 800.0)],
        "bert-base/default 128 [expandable_segments:True]": [(1, 90.0, 180.0), (16, 100.0, 200.0)],
    }
    if importlib.util.find_spec("matplotlib"):
        assert "memory.png" in plots.plot(results, str(tmp_path))
        assert (tmp_path / "memory.png").stat().st_size > 0


def test_ops_by_memory_adds_the_allocators_table_on_cuda_and_the_cpus_note_once(
    run_cell, tmp_path
):
    import json
    import shutil

    from compilekit.report import opsview

    cpu_run = run_cell("naive", "eager").run_dir
    text = opsview.ops_view(cpu_run, "memory")
    assert "measured on CUDA only" in text and allocator.CPU_NOTE not in text
    run = tmp_path / "cuda_run"  # the same files, as a CUDA cell would record them
    shutil.copytree(cpu_run, run)
    result = json.loads((run / "result.json").read_text())
    result["device"] = "cuda"
    result["memory"] = {"what": "one forward per side", "eager": allocator.forward_figures(STATS)}
    (run / "result.json").write_text(json.dumps(result))
    assert "The CUDA caching allocator, one forward per side" in opsview.ops_view(
        str(run), "memory"
    )


def test_do_bench_s_flush_buffer_is_handed_back_before_the_next_call(monkeypatch):
    """do_bench frees its 244 MiB L2-flush buffer into the cache when it returns; were a block
    that a later call keeps carved out of it, the memory figures after the timed calls would
    show 240 MiB of the toolkit's own as the model's fragmentation (reduce-overhead cells did,
    on an H100). So the cache is emptied as do_bench returns, before anything else runs."""
    triton_testing = pytest.importorskip("triton.testing")
    import torch

    from compilekit.measure import timing

    events = []

    def fake_do_bench(fn, warmup, rep, return_mode):
        fn()
        events.append("do_bench returned")
        return [1.0, 1.1, 0.9]

    monkeypatch.setattr(triton_testing, "do_bench", fake_do_bench)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: events.append("empty_cache"))
    timing.bench(lambda: events.append("call"), (), "cuda")
    assert events == ["call", "do_bench returned", "empty_cache"]


def test_two_allocators_of_one_cell_read_apart_in_the_cells_table_and_the_memory_table():
    """memory.toml runs a cell under both allocators: the report's cells table gets an alloc
    column (or the two rows read alike), and the memory table names the setting once."""
    from compilekit.report import cellview

    memory = {"allocator_conf": "expandable_segments:True", "eager": allocator.forward_figures(STATS)}
    both = [
        CellResult("bert-base", "eager", "64x128", "bfloat16", "cuda", status="ok",
                   compiled_ms=1.0, eager_ms=1.0, memory={**memory, "allocator_conf": ""}),
        CellResult("bert-base", "eager", "64x128", "bfloat16", "cuda", status="ok",
                   compiled_ms=1.0, eager_ms=1.0, memory=memory,
                   alloc="expandable_segments:True"),
    ]  # fmt: skip
    headers = cellview.headers(both)
    at = headers.index("alloc")
    assert [row[at] for row in cellview.rows(both, None)] == ["default", "expandable_segments:True"]
    assert "alloc" not in cellview.headers(both[:1])
    md = memoryview.section(both, cellview.cell_name)
    named = [line for line in md if "expandable_segments:True" in line]
    assert named and all(line.count("expandable_segments:True") == 1 for line in named)


def test_what_the_process_holds_is_read_after_the_timed_calls_and_before_the_check(
    tmp_path, monkeypatch
):
    """`held after the timed calls` is the steady state a user's loop leaves: read before the
    check builds its float64 reference (a Llama block at 64x512 read 25 GB held after it)."""
    from compilekit.launch import cell
    from compilekit.measure import cell as measuring
    from compilekit.model.result import for_cell
    from compilekit.model.spec import Cell, parse_shape

    monkeypatch.delenv("COMPILEKIT_GPU_LOCK", raising=False)
    events, check = [], measuring.check_against_reference
    monkeypatch.setattr(allocator, "held_mb", lambda device: events.append("held") or 7.0)
    monkeypatch.setattr(measuring, "check_against_reference",
                        lambda *a: events.append("check") or check(*a))  # fmt: skip
    monkeypatch.setattr(allocator, "record",
                        lambda *a: events.append(("record", a[-1])))  # fmt: skip
    eager = Cell("naive", "eager", parse_shape("1x2x64x16"), "float32", "cpu")
    cell.run_measure(eager, str(tmp_path), str(tmp_path), for_cell(eager))
    assert events == ["held", "check", ("record", 7.0)]


def test_every_optional_column_of_the_cells_table_sits_under_its_header():
    """The alloc, grad and padding-waste columns come and go with the cells: with all of them
    in, each row's value is under its own header."""
    from compilekit.report import cellview, varlenview

    ragged = CellResult("naive", "default", "1x4x128x32", "bfloat16", "cuda", status="ok",
                        compiled_ms=1.0, eager_ms=2.0, grad="inference",
                        alloc="expandable_segments:True",
                        varlen={"padding_waste": 0.25})  # fmt: skip
    plain = CellResult("naive", "default", "1x4x128x32", "bfloat16", "cuda", status="ok",
                       compiled_ms=1.0, eager_ms=2.0)  # fmt: skip
    headers = cellview.headers([ragged, plain])
    first, second = cellview.rows([ragged, plain], None)
    assert len(first) == len(headers)
    at = dict(zip(headers, first))
    assert at[varlenview.COLUMN] == "25%" and at["grad"] == "inference"
    assert at["alloc"] == "expandable_segments:True" and at["TFLOP/s"] == "-"
    assert dict(zip(headers, second))["alloc"] == "default"
