"""Whole cells on the CPU: every variant, every mode for naive, the result.json contract."""

import json
import os
import sys

import pytest

from compilekit.variants import VARIANTS

CONTRACT = {
    "variant",
    "mode",
    "shape",
    "dtype",
    "device",
    "torch_version",
    "status",
    "max_rel_err",
    "eager_ms",
    "compiled_ms",
    "speedup",
    "compile_cold_s",
    "compile_warm_s",
    "tflops",
}
# Built-ins whose backend has no CPU kernel; torch itself must say so (we record its words).
NO_CPU_KERNEL = {"sdpa-efficient", "sdpa-cudnn"}
# Triton kernels need a GPU, or the interpreter (tests/test_triton_flash.py runs that).
NEEDS_GPU = {"triton-flash", "triton-flash-gqa", "triton-flash-window"}
# Gluon kernels need a Hopper GPU itself: no interpreter runs them (tests/test_gluon_flash.py)
NEEDS_HOPPER = {"gluon-flash", "gluon-flash-gqa"}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_every_variant_eager_on_cpu(run_cell, variant):
    result = run_cell(variant, "eager")
    if variant in NEEDS_HOPPER:
        assert result.status == "unsupported", result.reason
        assert "needs a Hopper GPU" in result.reason or "needs Triton with Gluon" in result.reason
        return
    if variant in NEEDS_GPU and os.environ.get("TRITON_INTERPRET") != "1":
        assert result.status == "unsupported", result.reason
        assert "needs a CUDA GPU, or Triton's interpreter" in result.reason or (
            "needs Triton" in result.reason
        )
        return
    if variant in NO_CPU_KERNEL:
        # torch's own refusal, in torch's words
        assert result.status == "unsupported", result.reason
        from compilekit.measure.failures import REFUSALS

        assert any(words in result.reason for words in REFUSALS), result.reason
        return
    assert result.status == "ok", result.reason
    assert result.max_rel_err < 1e-3
    # an eager cell has no compile: its compile figures do not exist (null, not 0)
    assert result.compile_cold_s is None and result.compile_warm_s is None
    assert result.flops > 0 and result.tflops > 0


# On CPU, reduce-overhead compiles exactly as default and max-autotune-no-cudagraphs exactly as
# max-autotune (CUDA graphs are skipped there anyway, by the branch max-autotune takes below):
# 25-30 s of the suite each for nothing new (both set the same CUDA-graph option, whose skip
# note is checked here). The GPU tests run naive reduce-overhead (fidelity, replay costs), the
# H200 blog sweep every mode.
@pytest.mark.parametrize("mode", ["default", "max-autotune"])
def test_every_mode_runs_naive_on_cpu(run_cell, mode):
    result = run_cell("naive", mode)
    assert result.status == "ok", result.reason
    assert result.max_rel_err < 1e-4
    assert result.compile_cold_s > 0 and result.compile_warm_s > 0
    assert result.kernels_per_forward >= 1
    cudagraphs = result.cudagraphs
    if mode == "max-autotune":
        # asked for, never applied on CPU, and the run says so with torch's reason
        assert cudagraphs["requested"] and not cudagraphs["applied"]
        assert "skipped on cpu" in cudagraphs["note"]
        # cold alone, then the capture recompile with the measure process importing beside it
        assert set(result.processes) == {"cold", "capture", "measure"}
        assert "wait_for_cold" in result.steps_s and "cold.wait_for_measure_imports" not in (
            result.steps_s
        )
        # the capture's own process still dumps everything depyf and Inductor wrote
        files = os.listdir(os.path.join(result.run_dir, "depyf"))
        for pattern in (
            "full_code_for_attention", "__transformed_code_", "Forward_graph", "AFTER_POST_GRAD",
            ".kernel_",
        ):  # fmt: skip
            assert any(pattern in f for f in files), (pattern, files)
        kernels = os.listdir(os.path.join(result.run_dir, "kernels"))
        assert any(f.endswith(".cpp") for f in kernels)
    else:
        assert not cudagraphs["requested"]


def test_result_json_contract(run_cell):
    result = run_cell("naive", "default")
    with open(os.path.join(result.run_dir, "result.json")) as f:
        on_disk = json.load(f)
    assert CONTRACT <= set(on_disk)
    assert on_disk["shape"] == "1x4x128x32" and on_disk["device"] == "cpu"
    assert on_disk["status"] == "ok" and on_disk["schema_version"] == 2
    flop = 4 * 1 * 4 * 32 * (128 * 129 / 2)
    assert on_disk["tflops"] == pytest.approx(flop / (on_disk["compiled_ms"] * 1e-3) / 1e12)
    # the first run of a compiled cell: the honest cold compile and then the capture in one
    # process, the measurement in another; each process's steps come back. Where the small
    # sweep compiled this cell first under the session's cache (the order of test files is
    # xdist's), only the measurement runs, and the cold process's steps come from the cache.
    first = "cold" in on_disk["processes"]
    assert set(on_disk["processes"]) == ({"cold", "measure"} if first else {"measure"})
    steps = on_disk["steps_s"]
    assert {"measure_process", "compile_warm", "time"} <= set(steps)
    assert ("cold_process" in steps) == first
    assert on_disk["compile_cold_s"] > 0  # measured by this run or by the one that compiled it
    assert {"cold.compile_cold", "capture.compile_capture"} <= set(steps)
    # the artifacts parse, and the trace holds the fused C++ kernel the map names
    with open(os.path.join(result.run_dir, "trace.json")) as f:
        names = {e.get("name", "") for e in json.load(f)["traceEvents"]}
    with open(os.path.join(result.run_dir, "kernels.json")) as f:
        fused = [k["name"] for k in json.load(f)["kernels"] if k["kind"] == "generated"]
    assert fused and all(any(name in event for event in names) for name in fused)
    assert any(f.startswith("full_code_for_") for f in os.listdir(result.run_dir + "/depyf"))
    assert any(f.endswith(".cpp") for f in os.listdir(result.run_dir + "/kernels"))


def test_second_run_reuses_the_cold_measurement(run_cell, cache_root, tmp_path):
    from compilekit.launch import cache, runner
    from compilekit.model.spec import Cell, parse_shape

    run_cell("naive", "default")
    cell = Cell("naive", "default", parse_shape("1x4x128x32"), "float32", "cpu")
    # the cold figure kept with the cache (another test may have rebuilt it since run_cell)
    with open(os.path.join(cache.folder(cell, cache_root), "cold.json")) as f:
        kept = json.load(f)["compile_cold_s"]
    again = runner.launch(cell, str(tmp_path), cache_root=cache_root)
    assert again.status == "ok"
    assert again.compile_cold_s == kept
    assert "kept with the cache" in again.compile_notes["cold"]
    assert set(again.processes) == {"measure"}  # no new compile, no new capture
    assert os.listdir(os.path.join(again.run_dir, "kernels"))  # the capture came along


def test_cpu_cells_share_inductors_isa_probes_and_keep_them_out_of_the_cold_figure(
    run_cell, cache_root
):
    """Inductor's ISA probes (C++ test builds, 5 s on 2 cores) are a machine's, not a model's:
    built once in a shared folder, never in a cell's own cache, and the cold figure says so."""
    import glob

    from compilekit.launch import cache

    compiled = run_cell("naive", "default")
    probe = "__avx_chk_kernel"  # Inductor's vector-ISA check, compiled once per ISA

    def probes_in(folder):
        return [p for p in glob.glob(os.path.join(folder, "**", "*.cpp"), recursive=True)
                if probe in open(p).read()]  # fmt: skip

    assert probes_in(cache.isa_probe_folder(cache_root))
    assert "ISA probes" in compiled.compile_notes["cold"]
    folders = glob.glob(os.path.join(cache_root, compiled.label + "-*"))
    assert folders
    for folder in folders:
        assert not probes_in(folder), folder


def _key_of_a_copy(tmp_path):
    """key(variant, passes=()) -> the cache folder a cell gets from a copy of this checkout in
    tmp_path (each call a fresh process, so edits to the copy count)."""
    import shutil
    import subprocess

    from tests.conftest import ROOT

    for name in ("compilekit", "variants"):
        shutil.copytree(os.path.join(ROOT, name), tmp_path / name)
    probe = (
        "from compilekit.launch import cache; from compilekit.model.spec import Cell, parse_shape; "
        "print(cache.folder(Cell('{v}', 'default', parse_shape('1x4x64x16'), "
        "'float32', 'cpu', passes={p!r}), '/c'))"
    )

    def key(variant, passes=()):
        proc = subprocess.run(
            [sys.executable, "-c", probe.format(v=variant, p=tuple(passes))],
            cwd=tmp_path,
            env={**os.environ, "PYTHONPATH": str(tmp_path)},
            capture_output=True,
            text=True,
        )
        assert proc.returncode == 0, proc.stderr
        return proc.stdout.strip()

    return key


def _append(path, text):
    with open(path, "a") as f:
        f.write(text)


def test_cache_key_follows_every_imported_project_file(tmp_path):
    """Editing masks.py (imported by triton_flash_gqa) must give that cell a new cache; an
    unrelated edit must not."""
    key = _key_of_a_copy(tmp_path)
    gqa, naive = key("triton-flash-gqa"), key("naive")
    _append(tmp_path / "variants" / "triton_flash.py", "\n# an edit\n")
    assert key("triton-flash-gqa") != gqa
    assert key("naive") == naive  # naive does not import triton_flash
    _append(tmp_path / "variants" / "masks.py", "\n# an edit\n")
    assert key("triton-flash-gqa") != gqa and key("naive") != naive


def test_cache_key_follows_what_shapes_the_compile_and_nothing_else(tmp_path):
    """The phase and measuring code, comments anywhere: the cache stays. The compile-shaping
    modules' code, a pass's file: a new cache."""
    key = _key_of_a_copy(tmp_path)
    (tmp_path / "my_pass.py").write_text(
        "from compilekit.compile.passlib.naive_to_sdpa import make_pass as factory\n"
    )
    spec = f"{tmp_path / 'my_pass.py'}:factory"
    naive, passed = key("naive"), key("naive", [spec])
    _append(
        tmp_path / "compilekit" / "launch" / "cell.py",
        "\n# a comment\n\n\ndef later():\n    pass\n",
    )
    _append(tmp_path / "compilekit" / "measure" / "timing.py", "\nTIMING_EDIT = 1\n")
    _append(tmp_path / "compilekit" / "compile" / "settings.py", "\n# a comment only\n")
    settings = tmp_path / "compilekit" / "compile" / "settings.py"
    settings.write_text(settings.read_text().replace('"""', '"""Reworded: ', 1))  # docstring
    assert key("naive") == naive and key("naive", [spec]) == passed
    _append(tmp_path / "my_pass.py", "EDITED = True\n")
    assert key("naive", [spec]) != passed and key("naive") == naive
    _append(tmp_path / "compilekit" / "compile" / "settings.py", "\nSETTING_EDIT = 1\n")
    assert key("naive") != naive


def test_cudagraphs_mode_on_cpu_is_refused(cli):
    proc = cli(
        "run",
        "--variant",
        "naive",
        "--mode",
        "cudagraphs",
        "--device",
        "cpu",
        "--shape",
        "1x2x128x32",
    )
    assert proc.returncode == 2
    assert "needs a CUDA device" in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_cudnn_on_cpu_is_refused_with_torchs_reason(cli):
    proc = cli(
        "run",
        "--variant",
        "sdpa-cudnn",
        "--mode",
        "eager",
        "--device",
        "cpu",
        "--shape",
        "1x2x128x32",
    )
    assert proc.returncode == 2, proc.stderr
    assert "cannot run on cpu" in proc.stderr and "compilekit list" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_user_variant_runs_checked_against_itself(run_cell, user_variant):
    result = run_cell(f"{user_variant}:capped_attention", "default")
    assert result.status == "self-consistent", result.reason
    assert result.max_rel_err < 1e-4
    assert result.tflops is None  # it declares no FLOPs


def test_cli_run_prints_table_and_run_dir(cli, tmp_path):
    proc = cli(
        "run",
        "--variant",
        "naive",
        "--mode",
        "eager",
        "--shape",
        "1x4x128x32",
        "--out",
        str(tmp_path),
    )
    assert proc.returncode == 0, proc.stderr
    assert "latency     eager" in proc.stdout and "run directory:" in proc.stdout
    # it fits a terminal: no line of the summary is wider than 100 columns
    summary = proc.stdout.split("run directory:")[0].splitlines()
    assert len(summary) <= 12 and max(len(line) for line in summary[:3]) <= 100
    wide = cli("run", "--variant", "naive", "--mode", "eager", "--shape", "1x4x128x32",
               "--out", str(tmp_path), "--wide")  # fmt: skip
    assert wide.returncode == 0 and "eager_ms" in wide.stdout and "kernels/fwd" in wide.stdout
    run_dir = tmp_path / "naive__eager__1x4x128x32__float32__cpu"
    assert os.path.isfile(run_dir / "result.json")
    assert f"page: {run_dir / 'index.html'}" in proc.stdout  # the run ends naming its page
    assert os.path.isfile(run_dir / "index.html")


def test_python_api_runs_and_loads(tmp_path, cache_root, monkeypatch):
    import compilekit

    monkeypatch.setenv("COMPILEKIT_CACHE", cache_root)
    result = compilekit.run(variant="sdpa", mode="eager", shape="1x2x64x16", out=str(tmp_path))
    assert result.status == "ok"
    assert compilekit.load(result.run_dir).to_dict() == result.to_dict()


# A variant that notes, in a file beside it, when each cell process imported it and when each
# of its calls ran (outside the compiled graph), with the process's phase.
NOTING_VARIANT = """
import json, os, sys, time
import torch

NOTES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "notes.jsonl")


def note(what):
    with open(NOTES, "a") as f:
        f.write(json.dumps([sys.argv[1], what, time.time()]) + "\\n")


note("import")


@torch.compiler.disable
def called():
    note("call")


def attention(q, k, v):
    called()
    return torch.softmax(q @ k.transpose(-2, -1), dim=-1) @ v
"""


def test_a_first_run_overlaps_the_imports_but_never_the_cold_compile_and_the_measure(
    tmp_path, cache_root
):
    """The cold and measure processes of a first run start together: the measure process has
    imported before the cold process makes its first call, and makes none of its own until
    the cold process is done."""
    from compilekit.launch import runner
    from compilekit.model.spec import Cell, parse_shape

    (tmp_path / "noting.py").write_text(NOTING_VARIANT)
    cell = Cell(f"{tmp_path / 'noting.py'}:attention", "default", parse_shape("1x2x32x16"),
                "float32", "cpu")  # fmt: skip
    # the session's cache root (its CPU ISA probes are built): the variant is new, so its
    # cell is a first run all the same
    result = runner.launch(cell, str(tmp_path / "out"), cache_root=cache_root)
    assert result.measured, result.reason
    assert set(result.processes) == {"cold", "measure"}
    notes = [json.loads(ln) for ln in (tmp_path / "notes.jsonl").read_text().splitlines()]
    at = {(phase, what): [t for p, w, t in notes if (p, w) == (phase, what)]
          for phase in ("cold", "measure") for what in ("import", "call")}  # fmt: skip
    assert all(at.values()), at
    assert max(at["measure", "import"]) < min(at["cold", "call"])
    assert max(at["cold", "call"]) < min(at["measure", "call"])
    assert {"wait_for_cold", "cold.wait_for_measure_imports"} <= set(result.steps_s)
