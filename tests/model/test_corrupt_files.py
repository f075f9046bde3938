"""Well-formed JSON of the wrong shape in result.json or kernels.json: one line naming the file
("corrupt ... run the cell again"), exit 2, in every command that reads it; a report skips
such a cell and names it."""

import copy
import json

import pytest

from tests.report.test_null_figures import KMAP, NULL_CELLS, _cli, make_run

GOOD = NULL_CELLS["compiled_only"]


def _kmap_with(path, value):
    """KMAP with the value at `path` (keys and indices) replaced."""
    kmap = copy.deepcopy(KMAP)
    *head, last = path
    target = kmap
    for key in head:
        target = target[key]
    target[last] = value
    return kmap


KMAP_CASES = {
    "kernel record a number": _kmap_with(["kernels", 0], 3),
    "kernel record a string": _kmap_with(["kernels", 0], "cpp_fused"),
    "kernel record a list": _kmap_with(["kernels", 0], [1, 2]),
    "kernels a dict": _kmap_with(["kernels"], {"a": 1}),
    "device_ms a string": _kmap_with(["kernels", 0, "device_ms"], "fast"),
    "name a number": _kmap_with(["kernels", 0, "name"], 7),
    "a source line a string": _kmap_with(["kernels", 0, "source_lines", 0], "v.py:3"),
    "roofline share a string": _kmap_with(["kernels", 0, "roofline"], {"gbps": "x"}),
    "source_file outside the run": _kmap_with(["kernels", 0, "source_file"], "/etc/passwd"),
    "by-line row a list": _kmap_with(["by_source_line", 0], []),
    "kernels_per_forward null": _kmap_with(["kernels_per_forward"], None),
    "the whole file a list": [KMAP],
}


@pytest.mark.parametrize("case", KMAP_CASES)
def test_a_kernel_map_of_the_wrong_shape_is_one_line_in_every_command(case, tmp_path):
    good = make_run(tmp_path, "good", **GOOD)
    bad = make_run(tmp_path / "bad", "bad", **GOOD)
    (bad / "kernels.json").write_text(json.dumps(KMAP_CASES[case]))
    for args in (
        ["kernels", str(bad)],
        ["diff", str(bad), str(good)],
        ["diff", str(good), str(bad)],
        ["html", "--diff", str(good), str(bad), "--out", str(tmp_path / "d.html")],
    ):
        code, err = _cli(*args)
        assert code == 2, (args, err)
        assert len(err.strip().splitlines()) == 1 and "corrupt" in err, (args, err)
        assert "run the cell again" in err and "kernels.json" in err, err
    assert _cli("html", str(bad)) == (0, "")  # the run page stands and says what is missing
    assert "corrupt" in (bad / "index.html").read_text()


@pytest.mark.parametrize(
    "field, value",
    [
        ("compiled_ms", "abc"),
        ("shape", 123),
        ("shape", "big"),
        ("status", 1),
        ("noisy", "yes"),
        ("attempts", [3]),
        ("compiled_ms", None),
    ],  # fmt: skip
)
def test_a_result_of_the_wrong_type_is_one_line_and_a_report_skips_it(field, value, tmp_path):
    out = tmp_path / "sweep"
    make_run(out, "good", **GOOD)
    bad = make_run(out, "bad", **GOOD)
    data = json.loads((bad / "result.json").read_text())
    data[field] = value  # an ok cell without its time is no ok cell either
    (bad / "result.json").write_text(json.dumps(data))
    for args in (["kernels", str(bad)], ["html", str(bad)], ["verify", str(bad)]):
        code, err = _cli(*args)
        assert code == 2 and len(err.strip().splitlines()) == 1, (args, err)
        assert "result.json" in err and "run the cell again" in err, err
    code, err = _cli("report", str(out))
    assert code == 0 and "skipped" in err and "bad__default" in err and "corrupt" in err, err
    assert "good.py" in (out / "REPORT.md").read_text()
    assert "bad.py" not in (out / "REPORT.md").read_text()


@pytest.mark.parametrize(
    "cold", ["[]", '"x"', "{}", '{"compile_cold_s": "1", "measured_at": "", "includes": ""}']
)
def test_a_kept_cold_json_of_the_wrong_shape_drops_the_cache(cold, tmp_path):
    from compilekit.launch import cache

    key = {"cell": "c"}
    (tmp_path / "capture").mkdir()
    (tmp_path / "key.json").write_text(json.dumps(key))
    (tmp_path / "capture" / "graphs.json").write_text("{}")
    good = '{"compile_cold_s": 1.5, "measured_at": "then", "includes": "all"}'
    (tmp_path / "cold.json").write_text(good)
    assert cache.state(key, str(tmp_path), fresh=False) == (False, None)
    (tmp_path / "cold.json").write_text(cold)
    rebuild, note = cache.state(key, str(tmp_path), fresh=False)
    assert rebuild and "cold.json is corrupt" in note and "compiled again" in note


def test_a_symlinked_lock_is_refused_and_its_target_never_written(tmp_path, cli):
    from compilekit.model.errors import UserError
    from compilekit.model.store import open_lock

    target = tmp_path / "precious.txt"
    target.write_text("precious")
    out = tmp_path / "out"
    out.mkdir()
    (out / ".compilekit-sweep.lock").symlink_to(target)
    (tmp_path / "e.toml").write_text(
        'variants = ["naive"]\nmodes = ["eager"]\nshapes = ["1x2x16x8"]\ndevice = "cpu"\n'
    )
    proc = cli("sweep", str(tmp_path / "e.toml"), "--out", str(out))
    assert proc.returncode == 2 and "symbolic link" in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert target.read_text() == "precious"
    (tmp_path / "cpu.lock").symlink_to(tmp_path / "created-through-the-link")
    with pytest.raises(UserError, match="symbolic link"):  # the sweep's CPU and GPU locks
        open_lock(str(tmp_path / "cpu.lock"))
    assert not (tmp_path / "created-through-the-link").exists()


@pytest.mark.parametrize("case", ["kernel record a number", "device_ms a string"])
def test_a_resumed_sweep_runs_again_a_cell_whose_kernel_map_is_of_the_wrong_shape(case, tmp_path):
    """The commands that read it call it corrupt: a resume must not keep it as done."""
    import io

    from compilekit.launch import sweep

    good = make_run(tmp_path, "good", **GOOD)
    bad = make_run(tmp_path / "bad", "bad", **GOOD)
    (bad / "kernels.json").write_text(json.dumps(KMAP_CASES[case]))
    log = io.StringIO()
    assert sweep.cell_done(str(good), (), log) is not None
    assert sweep.cell_done(str(bad), (), log) is None
    assert (
        "kernels.json is corrupt" in log.getvalue() and "running the cell again" in log.getvalue()
    )
