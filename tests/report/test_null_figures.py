"""Cells whose figures are null (wrong output shape, failed, unsupported, eager could not run)
pass through every view: summary, progress line, REPORT.md, the pages, kernels, diff, verify."""

import contextlib
import io
import json
import os

import pytest

from compilekit import cli
from compilekit.launch import sweep
from compilekit.model.result import CellResult
from compilekit.model.spec import Cell, parse_shape
from compilekit.report import cellview, pages, sweepreport

WRONG_SHAPE = "def attention(q, k, v):\n    return q[..., :3]\n"
KMAP = {
    "forward_device_ms": 0.5,
    "kernels_per_forward": 1.0,
    "kernels": [
        {
            "name": "cpp_fused_softmax_0",
            "kind": "cpp",
            "launcher": "graph_0_cpp_fused_softmax_0",
            "aten_ops": ["aten::_softmax"],
            "source_lines": [{"file": "/v.py", "line": 3, "code": "x.softmax(-1)"}],
            "origin_lines": [],
            "source_via": "provenance",
            "source_file": None,
            "calls_per_forward": 1.0,
            "device_ms": 0.5,
            "share": 1.0,
        }
    ],
    "by_source_line": [
        {
            "file": "/v.py",
            "line": 3,
            "code": "x.softmax(-1)",
            "kernels": ["k"],
            "attributed_ms": 0.5,
        }
    ],
}
# every kind of record whose figures are (partly) null, as a cell writes it
NULL_CELLS = {
    "wrong_shape": dict(
        status="wrong", reason="eager: output shape (1, 2, 16, 3) != (1, 2, 16, 8)"
    ),
    "failed": dict(status="failed", reason="measure process died (killed by SIGSEGV)"),
    "unsupported": dict(status="unsupported", reason="No available kernel"),
    # compiled alone: eager could not run, so no eager time, speedup or break-even
    "compiled_only": dict(
        status="self-consistent",
        compiled_ms=0.5,
        max_rel_err=1e-6,
        error_bound=1e-3,
        eager_note="eager ran out of memory at this shape; compiled alone",
        host_bound=True,
        kernels_per_forward=1.0,
    ),
}


def make_run(out, name: str, **fields):
    """A run directory out/<label> as a cell writes it: result.json with these fields, a
    kernel map (KMAP) where it was measured, a log. Returns the run directory."""
    r = CellResult(f"/x/{name}.py:attention", "default", "1x2x16x8", "float32", "cpu")
    r.label = f"{name}__default__1x2x16x8__float32__cpu"
    for key, value in fields.items():
        setattr(r, key, value)
    run_dir = out / r.label
    run_dir.mkdir(parents=True)
    r.save(str(run_dir))
    if r.measured:
        (run_dir / "kernels.json").write_text(json.dumps(KMAP))
    (run_dir / "log.txt").write_text("the last line\n")
    return run_dir


@pytest.fixture
def null_sweep(tmp_path):
    """A sweep directory holding one run directory per record in NULL_CELLS (mode default)."""
    out = tmp_path / "sweep"
    for name, fields in NULL_CELLS.items():
        make_run(out, name, **fields)
    return out


def _runs(out):
    return sorted(str(out / d) for d in os.listdir(out) if os.path.isdir(out / d))


def _cli(*args):
    """(exit code, stderr) of compilekit's main in this process: an exception escapes."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = cli.main(list(args))
    return code, err.getvalue()


def test_a_cell_that_ended_before_its_profile_says_so_to_kernels_and_ops(null_sweep):
    """Not "run the cell again": an unsupported, failed or wrong cell has no kernel map and no
    op costs because it ended first, and its reason says why."""
    for r in sweepreport.load_results(str(null_sweep)):
        if r.measured:
            continue
        for command, what in (("kernels", "kernel map"), ("ops", "op cost matrix")):
            code, err = _cli(command, r.run_dir)
            assert code == 2 and len(err.strip().splitlines()) == 1, err
            assert f"was not measured, so it has no {what} ({r.status}: {r.reason})" in err, err


def test_every_view_takes_a_cell_whose_figures_are_null(null_sweep, tmp_path):
    loaded = sweepreport.load_results(str(null_sweep))
    assert len(loaded) == 4
    for r in loaded:
        summary = cellview.cell_summary(r)
        assert r.status in summary and "None" not in summary
        assert "None" not in "\n".join(cellview.cell_notes(r))
        cell = Cell(r.variant, r.mode, parse_shape(r.shape), r.dtype, r.device)
        line = sweep.progress_line(1, 4, cell, r, 1, 0.0)
        assert "None" not in line
        assert (f"{r.status} 0.500 ms" if r.measured else r.status).upper() in line.upper()
    wrong = next(r for r in loaded if r.label.startswith("wrong_shape"))
    assert not wrong.measured  # it never reached its timed calls
    assert "latency" not in cellview.cell_summary(wrong)
    assert pages.run_page(wrong.run_dir).endswith("index.html")
    assert _cli("report", str(null_sweep)) == (0, "")
    assert (null_sweep / "REPORT.md").is_file() and (null_sweep / "index.html").is_file()
    page = (null_sweep / "index.html").read_text()
    assert "wrong_shape" in page and "compiled_only" in page
    measured = next(r.run_dir for r in loaded if r.measured)
    for run in _runs(null_sweep):
        code, err = _cli("html", run)
        assert code == 0, err
        assert _cli("kernels", measured)[0] == 0
        for args in (["kernels", run], ["diff", run, measured], ["verify", run]):
            code, err = _cli(*args)
            assert code in (0, 2) and len(err.strip().splitlines()) <= 1, (args, err)
            assert "free space" not in err, (args, err)  # the fix named is the right one
        code, err = _cli("html", "--diff", run, measured, "--out", str(tmp_path / "d.html"))
        assert code in (0, 2) and len(err.strip().splitlines()) <= 1, err


def test_a_wrong_shape_cell_runs_and_shows_its_verdict(tmp_path, cli):
    variant = tmp_path / "wrongshape.py"
    variant.write_text(WRONG_SHAPE)
    proc = cli("run", "--variant", f"{variant}:attention", "--mode", "eager", "--device", "cpu",
               "--shape", "1x2x16x8", "--out", str(tmp_path / "runs"))  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert ": wrong" in proc.stdout and "output shape (1, 2, 16, 3)" in proc.stdout
    (run,) = os.listdir(tmp_path / "runs")
    assert (tmp_path / "runs" / run / "index.html").is_file()


SEGFAULTS = "import ctypes\n\ndef attention(q, k, v):\n    return ctypes.string_at(0)\n"


def wrong_segfault_good(tmp_path) -> str:
    """An experiment of three eager cells: a wrong-shape variant, a segfaulting one, naive."""
    (tmp_path / "wrongshape.py").write_text(WRONG_SHAPE)
    (tmp_path / "segfault.py").write_text(SEGFAULTS)
    (tmp_path / "e.toml").write_text(
        'variants = ["wrongshape.py:attention", "segfault.py:attention", "naive"]\n'
        'modes = ["eager"]\nshapes = ["1x2x16x8"]\ndevice = "cpu"\n'
    )
    return str(tmp_path / "e.toml")


def test_a_sweep_with_a_wrong_shape_and_a_segfault_measures_the_rest_and_resumes(tmp_path, cli):
    wrong_segfault_good(tmp_path)
    out = tmp_path / "out"
    proc = cli("sweep", str(tmp_path / "e.toml"), "--out", str(out))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr and "never ran" not in proc.stdout
    assert "1 ok, 0 self-consistent, 1 wrong, 0 unsupported, 1 failed" in proc.stdout
    assert (out / "REPORT.md").is_file() and (out / "index.html").is_file()
    again = cli("sweep", str(tmp_path / "e.toml"), "--out", str(out))
    assert again.returncode == 1 and "3 already done, 0 to run" in again.stdout, again.stdout


def test_an_output_of_another_dtype_is_wrong_and_recorded(tmp_path, cli):
    from compilekit.model import result as results

    (tmp_path / "half.py").write_text("def attention(q, k, v):\n    return q.half()\n")
    (tmp_path / "same.py").write_text("def attention(q, k, v):\n    return q * 1\n")
    found = {}
    for name in ("half", "same"):
        proc = cli("run", "--variant", f"{tmp_path / name}.py:attention", "--mode", "eager",
                   "--device", "cpu", "--shape", "1x2x16x8", "--out", str(tmp_path / "runs"))  # fmt: skip
        assert "Traceback" not in proc.stderr, proc.stderr
        (run,) = [d for d in os.listdir(tmp_path / "runs") if d.startswith(name)]
        found[name] = results.load(str(tmp_path / "runs" / run))
    assert found["half"].status == "wrong" and found["half"].output_dtype == "float16"
    assert "output dtype float16 != the cell's float32" in found["half"].reason
    assert found["same"].status == "self-consistent" and found["same"].output_dtype == "float32"


def test_a_diff_page_into_a_missing_folder_names_the_folder(null_sweep, tmp_path):
    measured = next(r for r in _runs(null_sweep) if "compiled_only" in r)
    out = tmp_path / "nonexistent" / "dir" / "x.html"
    code, err = _cli("html", "--diff", measured, measured, "--out", str(out))
    assert code == 2 and "no folder" in err and "create it" in err, err
    assert "free space" not in err


def test_a_file_name_with_markup_stays_text_in_reports_tables(tmp_path):
    """A user's variant file named with HTML and a '|': REPORT.md shows the name, and its row
    keeps its columns."""
    from compilekit.model import result as results
    from compilekit.report import sweepreport

    run = make_run(tmp_path, "x", **NULL_CELLS["compiled_only"])
    record = results.load(str(run))
    record.variant = "/x/<img src=x onerror=alert(1)>|y.py:attention"
    record.save(str(run))
    sweepreport.report(str(tmp_path))
    table = [ln for ln in (tmp_path / "REPORT.md").read_text().splitlines() if ln.startswith("|")]
    header, row = table[0], table[2]
    assert "<img" not in row and "&lt;img" in row
    assert row.replace("\\|", "").count("|") == header.count("|")
