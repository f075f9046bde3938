"""compilekit publish never deletes what it did not write: the destinations it refuses, each
before anything is written, and a failure that leaves the earlier publication whole. (What a
publication holds: tests/launch/test_sweep.py, on a real sweep.)"""

import json
import os
import subprocess
import sys

import pytest

from compilekit.model.errors import UserError
from compilekit.report import publish
from tests.conftest import ROOT

CELL = "naive__eager__1x2x16x8__float32__cpu"


def _tree(folder) -> dict:
    """{relative path: content} of every file under folder."""
    return {
        os.path.relpath(os.path.join(root, name), folder): open(os.path.join(root, name)).read()
        for root, _, names in os.walk(folder)
        for name in names
    }


@pytest.fixture
def sweep(tmp_path):
    """A sweep's folder as publish first reads it: a cell holding a result, and its bulk."""
    root = tmp_path / "sweep"
    (root / CELL).mkdir(parents=True)
    (root / CELL / "result.json").write_text("{}")
    (root / CELL / "trace.json").write_text("{}")
    (root / "sweep.json").write_text("{}")
    return root


def _refused(sweep, dest, match, extras=()):
    before = _tree(sweep), _tree(dest) if os.path.isdir(dest) else None
    with pytest.raises(UserError, match=match):
        publish.publish(str(sweep), str(dest), extras=extras, log=lambda *_: None)
    assert (_tree(sweep), _tree(dest) if os.path.isdir(dest) else None) == before


def test_the_sweep_itself_a_folder_inside_it_or_holding_it_is_refused(sweep, tmp_path):
    _refused(sweep, sweep, "is the sweep or inside it")
    _refused(sweep, sweep / "published", "is the sweep or inside it")
    _refused(sweep, tmp_path, "holds the sweep")
    os.symlink(sweep, tmp_path / "link")  # the same folder by another name
    _refused(sweep, tmp_path / "link", "is the sweep or inside it")


def test_a_folder_of_the_users_is_refused_and_an_earlier_publication_is_not(sweep, tmp_path):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "thesis.tex").write_text("years of work")
    _refused(sweep, mine, "holds files and no earlier publication")
    (mine / publish.MARK).write_text("not json")
    _refused(sweep, mine, "holds files and no earlier publication")
    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    _refused(sweep, a_file, "is a file")


def test_a_bad_extra_is_refused_before_the_earlier_publication_is_touched(sweep, tmp_path):
    earlier = tmp_path / "earlier"
    earlier.mkdir()
    (earlier / publish.MARK).write_text('{"files": ["REPORT.md"]}')
    (earlier / "REPORT.md").write_text("the old report")
    _refused(sweep, earlier, "--extra .* is not a file", extras=[str(tmp_path / "missing.txt")])
    with pytest.raises(UserError, match="no cell 'nope'"):
        publish.publish(str(sweep), str(earlier), page_cells=["nope"], log=lambda *_: None)
    assert _tree(earlier) == {
        publish.MARK: '{"files": ["REPORT.md"]}',
        "REPORT.md": "the old report",
    }


def test_a_failure_while_writing_leaves_the_earlier_publication_whole(
    sweep, tmp_path, monkeypatch
):
    earlier = tmp_path / "earlier"
    earlier.mkdir()
    (earlier / publish.MARK).write_text('{"files": ["REPORT.md"]}')
    (earlier / "REPORT.md").write_text("the old report")
    before = _tree(earlier)

    def fails_halfway(sweep_dir, dest, *args):
        os.makedirs(dest)
        open(os.path.join(dest, "REPORT.md"), "w").write("half a report")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(publish, "_write", fails_halfway)
    with pytest.raises(OSError):
        publish.publish(str(sweep), str(earlier), log=lambda *_: None)
    assert _tree(earlier) == before
    assert sorted(os.listdir(tmp_path)) == ["earlier", "sweep"]  # no staging folder left


def test_the_command_line_refuses_in_one_line_and_the_sweep_stays(sweep):
    proc = subprocess.run(
        [sys.executable, "-m", "compilekit", "publish", str(sweep), str(sweep)],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "new folder" in proc.stderr
    assert (sweep / CELL / "trace.json").is_file()


def test_a_cells_memory_timeline_is_published_gzipped_and_read_as_before(sweep, tmp_path):
    """The timeline is a CUDA cell's bulkiest file beside its kernel map (12-33 KB a model
    cell): published gzipped, and `compilekit memory` reads the published cell."""
    from types import SimpleNamespace

    from compilekit.evidence import timeline
    from compilekit.model.result import CellResult

    cell = "naive__eager__1x2x16x8__float32__cuda"
    (sweep / CELL).rename(sweep / cell)
    measured = CellResult("naive", "eager", "1x2x16x8", "float32", "cuda", label=cell)
    measured.status, measured.eager_ms, measured.compiled_ms = "ok", 1.0, 1.0
    measured.save(str(sweep / cell))
    curve = {"points": [[0.0, 1.0, 2.0]], "peak_allocated_mb": 1.0, "largest_at_peak": []}
    (sweep / cell / "memory_timeline.json").write_text(json.dumps(curve))
    dest = tmp_path / "published"
    publish.publish(str(sweep), str(dest), log=lambda *_: None)
    assert sorted(os.listdir(dest / cell)) == ["memory_timeline.json.gz", "result.json.gz"]
    cuda = SimpleNamespace(device="cuda", memory=None)
    assert timeline.load(str(dest / cell), cuda) == curve


def test_publishing_again_keeps_the_run_pages_and_extras_the_earlier_publication_had(tmp_path):
    """A sweep published with a run page, a cell's code and an --extra file, then published
    again without naming them: all are there again (the cells still in the sweep)."""
    from compilekit.model.result import CellResult

    sweep = tmp_path / "sweep"
    for name in ("naive", "sdpa"):
        label = f"{name}__default__1x2x16x8__float32__cpu"
        measured = CellResult(name, "default", "1x2x16x8", "float32", "cpu", label=label)
        measured.status, measured.eager_ms, measured.compiled_ms = "ok", 2.0, 1.0
        (sweep / label).mkdir(parents=True)
        measured.save(str(sweep / label))
    (sweep / "naive__default__1x2x16x8__float32__cpu" / "output_code_graph0.py").write_text("#")
    dest, said = tmp_path / "published", []
    naive, sdpa = "naive__default__1x2x16x8__float32__cpu", "sdpa__default__1x2x16x8__float32__cpu"
    notes = tmp_path / "figures.txt"
    notes.write_text("first")
    publish.publish(
        str(sweep), str(dest), page_cells=[sdpa], code_cells=[naive], extras=[str(notes)],
        log=said.append,
    )  # fmt: skip
    listed = lambda: sorted(  # noqa: E731
        os.path.relpath(os.path.join(root, n), dest) for root, _, ns in os.walk(dest) for n in ns
    )
    first = listed()
    assert f"{sdpa}/index.html" in first and f"{naive}/output_code_graph0.py" in first
    publish.publish(str(sweep), str(dest), log=said.append)
    assert listed() == first and (dest / "figures.txt").read_text() == "first"
    assert f"kept from the earlier publication: {sdpa}'s run page" in said
    notes.write_text("second")  # an extra given again replaces the earlier one
    publish.publish(str(sweep), str(dest), extras=[str(notes)], log=said.append)
    assert listed() == first and (dest / "figures.txt").read_text() == "second"
