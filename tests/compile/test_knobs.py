"""Inductor options per cell: parsed, validated against the running torch, carried by the cell
(name, cache), applied to the compile, recorded, grouped in reports and shown in diffs."""

import glob
import os
import re

import pytest

from compilekit.compile import knobs
from compilekit.model.errors import UserError


@pytest.mark.parametrize(
    "text, expected",
    [
        ("coordinate_descent_tuning=true", ("coordinate_descent_tuning", True)),
        ("max_fusion_size=8", ("max_fusion_size", 8)),
        ("max_autotune_gemm_backends=TRITON", ("max_autotune_gemm_backends", "TRITON")),
        ("cpp.simdlen = 1", ("cpp.simdlen", 1)),
    ],
)
def test_assignments_parse(text, expected):
    assert knobs.parse_assignment(text) == expected


def test_validation_names_the_fix():
    with pytest.raises(UserError, match="did you mean max_fusion_size"):
        knobs.validate({"max_fusion_siz": 1})
    with pytest.raises(UserError, match="takes bool"):
        knobs.validate({"coordinate_descent_tuning": "yes"})
    with pytest.raises(UserError, match="takes int"):
        knobs.validate({"max_fusion_size": True})
    assert knobs.validate({"max_fusion_size": 8}) == {"max_fusion_size": 8}
    with pytest.raises(UserError, match="do nothing under mode 'eager'"):
        knobs.check_mode({"max_fusion_size": 8}, "eager")


@pytest.mark.parametrize(
    "assignment, needle",
    [
        ("cpp.simdlen={1: {2: [3]}}", "takes int | None, not dict"),
        ("fx_graph_remote_cache=3", "takes bool | None, not int 3"),
        ("joint_custom_pre_pass=os.system", "takes a function or an object"),
        ("post_grad_custom_post_pass=print", "a graph pass goes through --pass"),
    ],
)
def test_options_whose_default_is_none_are_checked_by_their_declared_type(assignment, needle):
    """Options that default to None have no value to compare with: their declared type
    decides, and a function or pass object never comes from --set."""
    with pytest.raises(UserError, match=re.escape(needle)):
        knobs.validate(dict([knobs.parse_assignment(assignment)]), "--set")
    assert knobs.validate({"cpp.simdlen": 8}) == {"cpp.simdlen": 8}
    assert knobs.validate({"fx_graph_remote_cache": False}) == {"fx_graph_remote_cache": False}


def test_an_option_declared_as_literals_takes_each_of_them_and_names_them_otherwise():
    """Optional[Literal['default', 'custom_ops', ...]]: a legal value was once refused, the
    option said to take "Optional"."""
    import typing

    import torch._inductor.config as inductor_config

    literal = {
        key: typing.get_args(typing.get_args(entry.value_type)[0])
        for key, entry in inductor_config._config.items()
        if "Literal" in str(getattr(entry, "value_type", ""))
        and inductor_config.get_config_copy().get(key) is None
    }
    if not literal:
        pytest.skip("this torch declares no Inductor option as Optional[Literal[...]]")
    key, values = next(iter(literal.items()))
    assert knobs.validate({key: values[-1]}) == {key: values[-1]}
    with pytest.raises(UserError, match=re.escape(f"takes {values[0]!r}") + ".* not str 'bogus'"):
        knobs.validate({key: "bogus"})


def test_compile_options_merge_the_modes_own():
    merged = knobs.compile_options({"mode": "max-autotune"}, {"max_fusion_size": 8})
    assert merged["options"]["max_autotune"] is True and merged["options"]["max_fusion_size"] == 8
    assert knobs.compile_options({"mode": "max-autotune"}, {}) == {"mode": "max-autotune"}


def _kernel_source(result) -> str:
    (path,) = glob.glob(os.path.join(result.run_dir, "kernels", "cpp_fused_*softmax*.cpp"))
    with open(path) as f:
        return f.read()


def test_a_config_recompiles_changes_the_kernels_and_is_recorded(run_cell, cli):
    base = run_cell("naive", "default")
    scalar = run_cell("naive", "default", config={"cpp.simdlen": 1})
    assert scalar.status == "ok", scalar.reason
    assert scalar.config == {"cpp.simdlen": 1} and scalar.label.endswith("__cfg-cpp.simdlen=1")
    # its own cache: compiled anew (cold, then measure), not served from the base cell's
    assert set(scalar.processes) == {"cold", "measure"}
    # and applied: without a SIMD width Inductor writes scalar loops
    assert "Vectorized" in _kernel_source(base) and "Vectorized" not in _kernel_source(scalar)
    proc = cli("diff", base.run_dir, scalar.run_dir)
    assert proc.returncode == 0, proc.stderr
    assert "config A base vs B cpp.simdlen=1: cpp.simdlen: default -> 1" in proc.stdout


CONFIGS = """name = "knobs"
variants = ["naive"]
modes = ["eager", "default"]
shapes = ["1x2x64x16"]
device = "cpu"

[configs]
base = {}
fewer = { max_fusion_size = 8 }
"""


def test_experiment_configs_expand_and_skip_eager(tmp_path):
    from compilekit.userexperiment import load_experiment

    path = tmp_path / "k.toml"
    path.write_text(CONFIGS)
    cells = load_experiment(str(path)).cells
    labels = sorted(c.label() for c in cells)
    # eager runs no Inductor: one eager cell, not one per config
    assert labels == [
        "naive__default__1x2x64x16__float32__cpu",
        "naive__default__1x2x64x16__float32__cpu__cfg-fewer",
        "naive__eager__1x2x64x16__float32__cpu",
    ]


@pytest.mark.parametrize(
    "configs, needle",
    [
        ("[configs]\nx = { max_fusion_siz = 8 }\n", "did you mean max_fusion_size"),
        ("[configs]\nx = 5\n", "must be a table of Inductor options"),
        ('[configs]\nx = { coordinate_descent_tuning = "yes" }\n', "takes bool"),
        ("[configs]\nx = { static_inputs = 1 }\n", "compilekit option 'static_inputs' takes bool"),
        # the matrix's default mode has no CUDA graph whose copies it could spare
        ("[configs]\nx = { static_inputs = true }\n", "does nothing under mode 'default'"),
    ],
)
def test_bad_configs_are_one_line(configs, needle, tmp_path, cli):
    path = tmp_path / "bad.toml"
    path.write_text(CONFIGS.split("[configs]")[0] + configs)
    proc = cli("sweep", str(path), "--out", str(tmp_path / "out"))
    assert proc.returncode == 2 and needle in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_cli_set_is_validated_before_anything_runs(cli, tmp_path):
    proc = cli(
        "run",
        "--mode",
        "default",
        "--device",
        "cpu",
        "--set",
        "max_fusion_siz=1",
        "--out",
        str(tmp_path),
    )
    assert proc.returncode == 2 and "did you mean max_fusion_size" in proc.stderr
    assert not os.listdir(tmp_path)


def test_report_shows_configs_only_when_there_are_some():
    from compilekit.model.result import CellResult
    from compilekit.report.cellview import headers, rows

    plain = CellResult("naive", "default", "1x2x64x16", "float32", "cpu", status="ok")
    tuned = CellResult(
        "naive",
        "default",
        "1x2x64x16",
        "float32",
        "cpu",
        status="ok",
        config={"max_fusion_size": 8},
        config_name="fewer",
    )
    assert "config" not in headers([plain])
    cols = headers([plain, tuned])
    at = cols.index("config")
    assert [row[at] for row in rows([plain, tuned], None)] == ["base", "fewer"]


def test_report_tells_apart_cells_that_differ_only_in_pass_or_config(tmp_path):
    """The H200 knobs sweep read as two identical `naive / default` rows and bullets: a pass
    cell and a config cell must each be named as such in the table and the bullets, and keep
    their own place on the sweep page (there the pass cell had taken the base cell's)."""
    from compilekit.model.result import CellResult
    from compilekit.report import cellview, sweepreport

    def cell(**kw):
        return CellResult(
            "naive",
            "default",
            "1x2x64x16",
            "float32",
            "cpu",
            status="ok",
            eager_ms=2.0,
            compiled_ms=1.0,
            speedup=2.0,
            noisy=True,
            noise_note="p90 is 2x the fastest",
            **kw,
        )

    cells = [
        cell(),
        cell(passes=["naive-to-sdpa"]),
        cell(config={"coordinate_descent_tuning": True}, config_name="cdt"),
    ]
    cols = cellview.headers(cells)
    table = cellview.rows(cells, None)
    assert [(row[cols.index("config")], row[cols.index("pass")]) for row in table] == [
        ("base", "-"),
        ("base", "naive-to-sdpa"),
        ("cdt", "-"),
    ]
    names = [cellview.cell_name(r) for r in cells]
    assert len(set(names)) == 3 and "pass naive-to-sdpa" in names[1] and "config cdt" in names[2]
    for r in cells:
        r.label = cellview.cell_name(r).replace("`", "").replace(" ", "_").replace("/", "")
        os.makedirs(tmp_path / r.label)
        r.save(str(tmp_path / r.label))
    sweepreport.report(str(tmp_path))
    disturbed = (tmp_path / "REPORT.md").read_text().split("## Timings that may be disturbed")[1]
    assert all(name in disturbed for name in names)
    # the sweep page's matrices: each cell in one, none in another's place
    from compilekit.report import sweeppage

    groups = sweeppage.sweep_groups(cells, str(tmp_path))
    shown = [c["r"] for g in groups for _, row in g["rows"] for c in row if c]
    assert sorted(map(id, shown)) == sorted(map(id, cells))
    assert any("pass naive-to-sdpa" in g["title"] for g in groups)


def test_inductor_knobs_experiment_picks_configs_and_passes_per_matrix():
    from compilekit.userexperiment import load_experiment
    from tests.conftest import ROOT

    cells = load_experiment(f"{ROOT}/experiments/inductor_knobs.toml").cells
    assert len(cells) <= 40  # one H200 call
    by_label = {c.label(): c for c in cells}
    passed = [c for c in cells if c.passes]
    assert {(c.variant, c.mode, c.config_name) for c in passed} == {
        ("naive", "default", ""),
        ("naive-inline", "default", ""),
    }
    assert all(c.passes == ("naive-to-sdpa",) for c in passed)
    assert all(not c.config and not c.passes for c in cells if c.mode == "eager")
    autotuned = {(c.variant, c.config_name) for c in cells if c.mode.startswith("max-autotune")}
    assert autotuned == {
        ("naive", ""), ("naive", "gemm_aten"), ("naive", "gemm_triton"),
        ("flex", ""), ("flex", "flex_exhaustive"),
    }  # fmt: skip
    assert "naive__default__8x16x1024x64__bfloat16__cuda__cfg-cdt" in by_label


def test_static_inputs_is_compilekits_own_option_not_inductors(cli, tmp_path):
    """static_inputs marks the cell's tensors static where they are made and never reaches
    Inductor; a mode without CUDA graphs refuses it in one line."""
    import torch

    from compilekit.compile import knobs
    from compilekit.compile.variant import load_variant
    from compilekit.measure.inputs import cell_inputs
    from compilekit.model.spec import Cell, parse_shape

    config = knobs.validate({"static_inputs": True, "max_fusion_size": 8})
    assert knobs.compile_options({"mode": "reduce-overhead"}, {"static_inputs": True}) == {
        "mode": "reduce-overhead"
    }
    assert "static_inputs" not in knobs.compile_options({}, config)["options"]
    for items, marked in (((), False), ((("static_inputs", True),), True)):
        cell = Cell(
            "naive", "reduce-overhead", parse_shape("1x2x64x16"), "float32", "cpu", 0, items
        )
        args = cell_inputs(load_variant("naive"), cell)
        # how torch._dynamo.mark_static_address marks a tensor, and cudagraph trees read it
        assert [getattr(t, "_dynamo_static_input_type", None) for t in args] == [
            "unguarded" if marked else None
        ] * 3
        assert all(isinstance(t, torch.Tensor) for t in args)
    knobs.check_shape(config, parse_shape("1x2x64x16"))
    with pytest.raises(UserError, match="a decode step's are new each step"):
        knobs.check_shape(config, parse_shape("1x32+200"))
    proc = cli("run", "--mode", "default", "--device", "cpu", "--set", "static_inputs=true",
               "--out", str(tmp_path))  # fmt: skip
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "use one of reduce-overhead, max-autotune" in proc.stderr and not os.listdir(tmp_path)
