"""Sweeps on the CPU: resumable, failures recorded, reports and plots, bad experiment files."""

import dataclasses
import glob
import json
import math
import os
import signal
import subprocess
import sys
import time

import pytest

from compilekit.model.store import kept
from tests.conftest import ROOT

EAGER_ONLY = """name = "resume"
variants = ["naive", "sdpa"]
modes = ["eager"]
shapes = ["1x2x64x32", "1x2x96x32"]
dtype = "float32"
device = "cpu"
[against]
"naive" = ["sdpa:eager"]
"""


def _sweep_cmd(path, out):
    return [sys.executable, "-m", "compilekit", "sweep", str(path), "--out", str(out)]


def _done(out):
    return sorted(
        d
        for d in os.listdir(out)
        if os.path.isfile(kept(os.path.join(out, d, "result.json")))  # gzipped when published
        and ".tmp-" not in d
        and ".old-" not in d
    )


def test_killed_sweep_resumes_only_missing_cells(tmp_path, cache_root):
    path = tmp_path / "resume.toml"
    path.write_text(EAGER_ONLY)
    out = tmp_path / "out"
    env = {**os.environ, "COMPILEKIT_CACHE": cache_root}
    proc = subprocess.Popen(
        _sweep_cmd(path, out),
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.time() + 300
    while time.time() < deadline and (not out.exists() or len(_done(out)) < 2):
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    before = {d: os.path.getmtime(out / d / "result.json") for d in _done(out)}
    assert 2 <= len(before) < 4
    # a sweep cut short has already said what it compares, and that it is not complete
    cut = json.loads((out / "sweep.json").read_text())
    assert cut["against"] and cut["complete"] is False
    subprocess.run(
        [sys.executable, "-m", "compilekit", "report", str(out)], cwd=ROOT, env=env, check=True,
        capture_output=True,
    )  # fmt: skip
    assert "**Not finished:**" in (out / "REPORT.md").read_text()
    again = subprocess.run(
        _sweep_cmd(path, out), cwd=ROOT, env=env, capture_output=True, text=True, timeout=600
    )
    assert again.returncode == 0, again.stderr
    assert f"{len(before)} already done, {4 - len(before)} to run" in again.stdout
    assert len(_done(out)) == 4
    assert all(os.path.getmtime(out / d / "result.json") == t for d, t in before.items())
    assert not [d for d in os.listdir(out) if ".tmp-" in d]  # the killed cell left no half-run
    # the [against] table reaches the report through sweep.json: naive beside sdpa per shape
    md = (out / "REPORT.md").read_text()
    assert "Not finished" not in md
    assert "### naive\n" in md and "| x sdpa eager |" in md
    assert md.count("| `naive` / `eager` / 1x2x") == 2


def test_small_sweep_records_unsupported_and_completes_the_rest(small_sweep):
    proc, out = small_sweep
    assert proc.returncode == 0, proc.stdout + proc.stderr
    from compilekit.model import result as results_mod

    results = [results_mod.load(str(out / d)) for d in _done(out)]
    assert len(results) == 9
    cudnn = [r for r in results if r.variant == "sdpa-cudnn"]
    assert len(cudnn) == 2 and all(r.status == "unsupported" for r in cudnn)
    assert all("backend" in r.reason or "kernel" in r.reason for r in cudnn)
    others = [r for r in results if r.variant != "sdpa-cudnn"]
    assert all(r.status == "ok" for r in others)
    assert "[9/9]" in proc.stdout and "2 unsupported" in proc.stdout and "0 failed" in proc.stdout


def test_report_markdown_and_break_even(small_sweep):
    _, out = small_sweep
    assert os.path.isfile(out / "REPORT.md") and os.path.isfile(out / "env.json")
    md = (out / "REPORT.md").read_text()
    assert "| naive " in md and "break_even_cold" in md and "Measured ceilings" in md
    assert "sdpa-cudnn" in md and "unsupported" in md
    import dataclasses

    from compilekit.model.result import CellResult
    from compilekit.report.worth import break_even_calls

    faster = CellResult(
        "v",
        "default",
        "1x1x8x8",
        "float32",
        "cpu",
        status="ok",
        eager_ms=2.0,
        compiled_ms=1.0,
        eager_timing={"p10_ms": 1.9},
        compiled_timing={"p90_ms": 1.1},
    )
    assert break_even_calls(10.0, faster) == 10_000  # 10 s over 1 ms saved per call
    noisy = dataclasses.replace(faster, compiled_timing={"p90_ms": 2.5})
    assert break_even_calls(10.0, noisy) is None


def test_plots_written_with_matplotlib(small_sweep):
    pytest.importorskip("matplotlib")
    from compilekit.report.sweepreport import report

    _, out = small_sweep
    report(str(out))
    assert os.path.getsize(out / "speedup.png") > 1000
    assert "![speedup.png](speedup.png)" in (out / "REPORT.md").read_text()


def test_plots_skipped_with_a_note_without_matplotlib(small_sweep, monkeypatch, tmp_path):
    import shutil

    from compilekit.report.sweepreport import report

    _, out = small_sweep
    copy = tmp_path / "copy"
    shutil.copytree(out, copy, ignore=shutil.ignore_patterns("*.png"))
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now fails
    text = report(str(copy))
    assert "plots skipped" in text
    assert "Plots: skipped" in (copy / "REPORT.md").read_text()
    assert not list(copy.glob("*.png"))


def test_scaling_exponent_fit():
    from compilekit.model.result import CellResult
    from compilekit.report.plots import scaling_series

    cells = [
        CellResult("v", "eager", f"1x1x{s}x64", "float32", "cpu", compiled_ms=1e-6 * s**2)
        for s in (512, 1024, 2048, 4096)
    ]
    ((xs, ys, slope),) = scaling_series(cells).values()
    assert xs == [512, 1024, 2048, 4096] and slope == pytest.approx(2.0)


def test_speedup_and_break_even_against_sequence_length(tmp_path):
    """The seqlen report: per compiled series, each S's speedup and break-even calls (a longer S
    pays a compile back in fewer calls here); eager series and lone shapes are not listed."""
    from compilekit.model.result import CellResult
    from compilekit.report import sweepreport

    def cell(mode, seq, eager_ms, compiled_ms, shape="4x16x{}x64"):
        return CellResult(
            "naive", mode, shape.format(seq), "bfloat16", "cuda", status="ok",
            eager_ms=eager_ms, compiled_ms=compiled_ms, speedup=eager_ms / compiled_ms,
            compile_cold_s=2.0, compile_warm_s=1.0,
        )  # fmt: skip

    cells = [
        cell("default", 512, 0.2, 0.1),
        cell("default", 1024, 1.0, 0.25),
        cell("eager", 512, 0.2, 0.2),
        cell("eager", 1024, 1.0, 1.0),
        cell("default", 2048, 4.0, 4.0),  # no faster: never pays back
        cell("default", 512, 0.2, 0.1, shape="1x1x{}x128"),  # a lone S in its series
    ]
    rows = sweepreport.against_seq(cells)
    assert rows == [
        "| naive/default B=4 H=16 D=64 bfloat16 | 512 | 0.1 | 0.2 | 2.00 | 20,000 / 10,000 |",
        "| naive/default B=4 H=16 D=64 bfloat16 | 1024 | 0.25 | 1 | 4.00 | 2,667 / 1,334 |",
        "| naive/default B=4 H=16 D=64 bfloat16 | 2048 | 4 | 4 | 1.00 | never / never |",
    ]
    for i, r in enumerate(cells):
        r.label = f"cell{i}"
        os.makedirs(tmp_path / r.label)
        r.save(str(tmp_path / r.label))
    sweepreport.report(str(tmp_path))
    md = (tmp_path / "REPORT.md").read_text()
    assert "## Speedup and break-even against sequence length" in md and rows[1] in md


def test_a_resumed_sweep_keeps_or_reruns_cells_as_asked(tmp_path):
    """Kept: a quiet cell always; a noisy one unless --retry-noisy; a failed one unless
    --retry-failed. What the sweep runs again it says, with the noise it saw."""
    import io

    from compilekit.launch import sweep
    from compilekit.model.result import CellResult

    def stored(name, **fields):
        run_dir = tmp_path / name
        run_dir.mkdir()
        CellResult("naive", "default", "1x2x64x32", "float32", "cpu", **fields).save(str(run_dir))
        empty = {"kernels": [], "by_source_line": [], "kernels_per_forward": 0,
                 "forward_device_ms": 0.0}  # fmt: skip
        (run_dir / "kernels.json").write_text(json.dumps(empty))
        return str(run_dir)

    quiet = stored("quiet", status="ok", compiled_ms=1.0)
    noisy = stored(
        "noisy", status="ok", compiled_ms=1.5, noisy=True, noise_note="p90 is 2.20x the fastest"
    )
    failed = stored("failed", status="failed", reason="boom")
    log = io.StringIO()
    for retry, rerun in [
        ((), set()),
        (("noisy",), {noisy}),
        (("failed",), {failed}),
        (sweep.RETRY, {noisy, failed}),
    ]:
        again = {d for d in (quiet, noisy, failed) if sweep.cell_done(d, retry, log) is None}
        assert again == rerun, retry
    assert f"{noisy}: noisy timing (p90 is 2.20x the fastest); timing it again" in log.getvalue()


def test_retry_noisy_from_the_command_line_times_a_noisy_cell_again(tmp_path, cli):
    path = tmp_path / "one.toml"
    path.write_text('variants = ["naive"]\nmodes = ["eager"]\nshapes = ["1x2x64x32"]\n')
    out = tmp_path / "out"
    assert cli("sweep", str(path), "--out", str(out)).returncode == 0
    (cell,) = [d for d in out.iterdir() if (d / "result.json").exists()]
    data = json.loads((cell / "result.json").read_text())
    data.update(noisy=True, noise_note="p90 is 3.00x the fastest")
    (cell / "result.json").write_text(json.dumps(data))
    again = cli("sweep", str(path), "--out", str(out), "--retry-noisy")
    assert again.returncode == 0, again.stderr
    assert "noisy timing (p90 is 3.00x the fastest); timing it again" in again.stdout
    assert "1 cells, 0 already done, 1 to run" in again.stdout


def test_retry_changed_runs_again_the_cells_whose_variant_code_moved(tmp_path, cli):
    """A cell records the code it ran; after the variant's file changes, a resumed sweep says
    the kept cell is out of date, and --retry-changed runs it again (and only then)."""
    mine = tmp_path / "mine.py"
    mine.write_text("def attention(q, k, v):\n    return q\n")
    path = tmp_path / "e.toml"
    path.write_text(
        'variants = ["mine.py:attention"]\nmodes = ["eager"]\nshapes = ["1x2x64x16"]\n'
    )
    out = tmp_path / "out"
    assert cli("sweep", str(path), "--out", str(out)).returncode == 0
    (cell,) = [d for d in out.iterdir() if (d / "result.json").exists()]
    assert json.loads((cell / "result.json").read_text())["code_sources"]["variant"]
    same = cli("sweep", str(path), "--out", str(out), "--retry-changed")
    assert "1 already done, 0 to run" in same.stdout and "code" not in same.stdout
    mine.write_text("def attention(q, k, v):\n    return q * 1\n")
    kept_one = cli("sweep", str(path), "--out", str(out))
    assert "1 already done, 0 to run" in kept_one.stdout
    assert "1 cells kept were not measured with this checkout's code" in kept_one.stdout
    again = cli("sweep", str(path), "--out", str(out), "--retry-changed")
    assert again.returncode == 0, again.stderr
    assert "code changed since it was measured; running it again" in again.stdout
    assert "0 already done, 1 to run" in again.stdout


def test_a_result_without_a_record_of_its_code_is_out_of_date():
    from compilekit.launch import cache
    from compilekit.launch.cache import code_moved
    from compilekit.model.spec import Cell

    cell = Cell("naive", "default", "1x2x64x32", "float32", "cpu")
    now = {"variant": "a1", "passes": []}
    hashed = {("naive",): now}  # the checkout's, as a sweep keeps them
    assert code_moved(cell, now, hashed) is None
    assert "no record" in code_moved(cell, None, hashed)
    assert "naive's code changed" in code_moved(cell, {"variant": "b2", "passes": []}, hashed)
    assert "a pass's code" in code_moved(cell, {"variant": "a1", "passes": ["c3"]}, hashed)
    # without a store of them, the checkout's own hashes: the registry's naive, unchanged
    assert code_moved(cell, cache.code_sources(cell)) is None


AGAINST = 'variants = ["naive"]\nmodes = ["eager"]\nshapes = ["1x2x64x32"]\n[against]\n{}\n'


def test_cells_against_baselines_at_the_same_shape(tmp_path):
    """[against]: each correct cell of the compared variant beside each baseline's cell of the
    same shape and dtype (without configs or passes): baseline ms / its ms, '-' where the
    baseline has no correct cell there; the table travels in sweep.json to the report."""
    from compilekit.model.experiment import against_json
    from compilekit.model.result import CellResult
    from compilekit.model.store import write_json
    from compilekit.report import sweepreport
    from compilekit.userexperiment import load_experiment

    path = tmp_path / "k.toml"
    path.write_text(
        'variants = ["triton-flash", "sdpa-cudnn", "flex"]\nmodes = ["eager", "default"]\n'
        'shapes = ["1x2x64x16", "1x2x128x16"]\ndevice = "cpu"\n'
        '[against]\n"triton-flash" = ["sdpa-cudnn:eager", "flex:default", "sdpa-cudnn:same"]\n'
    )
    against = load_experiment(str(path)).against
    assert against == {
        "triton-flash": [("sdpa-cudnn", "eager"), ("flex", "default"), ("sdpa-cudnn", "same")]
    }

    def cell(variant, mode, seq, ms, status="ok", config=None):
        r = CellResult(
            variant, mode, f"1x2x{seq}x16", "float32", "cpu", status=status, compiled_ms=ms,
            tflops=100.0 / ms, config=config or {}, config_name="c" if config else "",
            eager_ms=ms, speedup=1.0,
        )  # fmt: skip
        r.label = f"{variant}_{mode}_{seq}_{status}_{bool(config)}"
        os.makedirs(tmp_path / "out" / r.label)
        r.save(str(tmp_path / "out" / r.label))

    cell("triton-flash", "eager", 64, 0.5)
    cell("triton-flash", "default", 64, 0.4)
    cell("triton-flash", "eager", 128, 2.0)
    cell("sdpa-cudnn", "eager", 64, 0.45)
    cell("sdpa-cudnn", "default", 64, 0.3)  # the default cell's own-mode baseline
    cell("sdpa-cudnn", "eager", 128, 1.0, status="wrong")  # not a baseline: it is wrong
    cell("flex", "default", 64, 0.6)
    cell("flex", "default", 128, 1.0, config={"max_fusion_size": 8})  # a config: not the flex
    cell("flex", "default", 128, 3.0)
    write_json(str(tmp_path / "out" / "sweep.json"), {"against": against_json(against)})
    sweepreport.report(str(tmp_path / "out"))
    md = (tmp_path / "out" / "REPORT.md").read_text()
    assert "## Against baselines, per shape" in md
    rows = [line for line in md.splitlines() if line.startswith("| `triton-flash`")]
    assert rows == [
        "| `triton-flash` / `default` / 1x2x64x16 | 0.4000 | 250 | 1.12x | 1.50x | 0.75x |",
        "| `triton-flash` / `eager` / 1x2x64x16 | 0.5000 | 200 | 0.90x | 1.20x | 0.90x |",
        "| `triton-flash` / `eager` / 1x2x128x16 | 2.0000 | 50 | - | 1.50x | - |",
    ]
    assert "| x sdpa-cudnn (its mode) |" in md
    from compilekit.report import sweeppage  # the sweep page shows the same, each cell linked

    with open(sweeppage.sweep_page(str(tmp_path / "out"), log=None)) as f:
        html = f.read()
    assert 'id="against"' in html and "<th>x sdpa-cudnn eager</th><th>x flex default</th>" in html
    assert (
        "default / 1x2x64x16</a></td><td>0.4000</td><td>250</td><td>1.12x</td><td>1.50x</td>"
        "<td>0.75x</td>" in html
    )


@pytest.mark.parametrize(
    "text, needle",
    [
        ('variants = ["naive"\nmodes = ["eager"]', "malformed TOML"),
        (
            'variants = ["naive"]\nmodes = ["eager"]\nshapes = ["1x2x64x32"]\nvariant = "x"\n',
            "line 4: unknown key 'variant'",
        ),
        (
            'variants = ["naive", "nope"]\nmodes = ["eager"]\nshapes = ["1x2x64x32"]\n',
            "line 1: unknown variant 'nope'",
        ),
        (
            'variants = ["naive"]\nmodes = ["eager",\n "turbo"]\nshapes = ["1x2x64x32"]\n',
            "line 3: unknown mode 'turbo'",
        ),
        (
            'variants = []\nmodes = ["eager"]\nshapes = ["1x2x64x32"]\n',
            "no variants: the matrix is empty",
        ),
        ('variants = ["naive"]\nmodes = ["eager"]\nshapes = ["1x2x64"]\n', "malformed shape"),
        (
            'shapes = ["1x2x64x32"]\n[[matrix]]\nvariants = ["naive"]\nmodes = ["eager"]\nbogus = 1\n',
            "line 5: unknown key 'bogus' in [[matrix]] #1",
        ),
        (
            'shapes = ["1x2x64x32"]\n[[matrix]]\nvariants = ["naive"]\nmodes = ["default"]\n'
            'passes = ["nope.py:make"]\n',
            "line 5: pass file",
        ),
        (
            '[configs]\nbase = {}\n[[matrix]]\nvariants = ["naive"]\nmodes = ["default"]\n'
            'shapes = ["1x2x64x32"]\nconfigs = ["cdt"]\n',
            "must list names from the [configs] table: base",
        ),
        (
            AGAINST.format('"sdpa" = ["naive:eager"]'),
            "[against] compares 'sdpa', which no cell of the experiment runs",
        ),
        (
            AGAINST.format('"naive" = ["naive:default"]'),
            "[against] baseline 'naive:default' for 'naive' is not a cell",
        ),
        (AGAINST.format('"naive" = "naive:eager"'), 'must list baselines as "variant:mode"'),
        (  # naive runs only eager here: "its mode" finds no naive default to compare
            'variants = ["naive"]\nmodes = ["eager"]\nshapes = ["1x2x64x32"]\n[[matrix]]\n'
            'variants = ["sdpa"]\nmodes = ["default"]\n[against]\n"sdpa" = ["naive:same"]\n',
            "[against] baseline 'naive:same' for 'sdpa' is not a cell",
        ),
    ],
)
def test_bad_experiment_file_is_one_line_and_runs_nothing(text, needle, tmp_path, cli):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    out = tmp_path / "out"
    proc = cli("sweep", str(path), "--out", str(out))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert needle in proc.stderr and str(path) in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
    assert not out.exists()


def test_missing_experiment_and_report_dir(cli, tmp_path):
    proc = cli("sweep", str(tmp_path / "none.toml"))
    assert proc.returncode == 2 and "not found" in proc.stderr
    proc = cli("report", str(tmp_path))
    assert proc.returncode == 2 and "no cell results" in proc.stderr


def test_sweep_page_links_every_cell_to_its_run_page(small_sweep, open_page):
    from tests.conftest import png_colors

    proc, out = small_sweep
    assert f"page: {out / 'index.html'}" in proc.stdout
    page, errors = open_page(str(out / "index.html"))
    links = page.locator("table.matrix td a")
    assert links.count() == 9
    hrefs = [links.nth(i).get_attribute("href") for i in range(links.count())]
    assert all(h.endswith("/index.html") and (out / h).is_file() for h in hrefs), hrefs
    problems = page.locator("#problems li").all_inner_texts()
    assert len(problems) == 2 and all("sdpa-cudnn" in p and "unsupported" in p for p in problems)
    # the plots show from the files beside the page (a published sweep carries each once)
    images = page.locator("figure img")
    assert images.count() >= 1
    for i in range(images.count()):
        assert (out / images.nth(i).get_attribute("src")).is_file()
        assert images.nth(i).evaluate("img => img.complete && img.naturalWidth > 0")
    assert png_colors(page.screenshot()) > 50
    links.first.click()
    page.wait_for_load_state()
    assert page.url.endswith("/index.html") and page.locator("#summary").is_visible()
    assert errors == []


def test_publish_keeps_the_evidence_drops_the_bulk_and_rederives_from_kernel_maps(
    small_sweep, tmp_path
):
    """compilekit publish: what goes into experiments/results from a sweep."""
    import json
    import shutil

    from compilekit.model import result as results_mod
    from compilekit.report import publish

    _, out = small_sweep
    src = tmp_path / "sweep"
    shutil.copytree(out, src)
    measured = [d for d in _done(src) if results_mod.load(str(src / d)).measured]
    stale = src / measured[0] / "result.json"
    data = json.loads(stale.read_text())
    data["roofline"] = "roofline: read by older code"
    stale.write_text(json.dumps(data))
    (src / measured[0] / "trace.json").write_text("{}")  # bulk: stays behind
    # an earlier run kept in attempts/: its record goes with the cell, its bulk stays
    kept = src / measured[0] / "attempts" / "20261201-000000-000000-1"
    shutil.copytree(src / measured[0], kept, ignore=shutil.ignore_patterns("attempts"))
    dest = tmp_path / "published"
    dest.mkdir()
    (dest / "README.md").write_text("prose about the results\n")  # written before publishing
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "compilekit",
            "publish",
            str(src),
            str(dest),
            "--code",
            measured[0],
        ],  # fmt: skip
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert f"re-derived from its kernel map: {measured[0]}" in proc.stdout
    assert f"wrote {dest / 'REPORT.md'}" in proc.stdout  # where it is, not where it was staged
    assert ".publishing-" not in proc.stdout
    assert (dest / "README.md").read_text() == "prose about the results\n"
    assert _done(dest) == _done(src)
    republished = results_mod.load(str(dest / measured[0]))
    assert republished.roofline and "older code" not in republished.roofline
    assert not (dest / measured[0] / "trace.json").exists()
    # the kernel map and the record go gzipped, and every reader takes them so
    for name in ("kernels.json", "result.json"):
        assert (dest / measured[0] / f"{name}.gz").is_file(), name
        assert not (dest / measured[0] / name).exists(), name
    from compilekit.model import kernelfile
    from compilekit.report import runview

    names = [
        k["name"] for k in kernelfile.load(str(src / measured[0] / "kernels.json"))["kernels"]
    ]
    gz_names = [
        k["name"] for k in kernelfile.load(str(dest / measured[0] / "kernels.json"))["kernels"]
    ]
    assert gz_names == names and names
    assert names[0][:40] in runview.kernels_view(str(dest / measured[0]))
    from compilekit.report import opsview

    assert (dest / measured[0] / "ops.json.gz").is_file()
    assert opsview.ops_rows(str(dest / measured[0])) == opsview.ops_rows(str(src / measured[0]))
    published_attempt = dest / measured[0] / "attempts" / kept.name
    assert (published_attempt / "result.json").is_file()
    assert not (published_attempt / "kernels.json").exists()
    for page in ("REPORT.md", "index.html", f"{measured[0]}/index.html"):
        assert (dest / page).is_file(), page
    assert glob.glob(str(dest / measured[0] / "output_code*.py"))  # the one example's code
    others = measured[1:]
    assert others and not (dest / others[0] / "index.html").exists()
    assert not (dest / others[0] / "log.txt").exists()
    assert not glob.glob(str(dest / others[0] / "output_code*.py"))
    # the sweep page links a cell without a run page to its record
    assert f'href="{others[0]}/result.json.gz"' in (dest / "index.html").read_text()
    assert results_mod.read_run(str(dest / others[0])).label == others[0]
    # `compilekit report` refreshes a published folder's REPORT.md and page, and draws no run
    # page for its cells (`compilekit html` does, asked)
    (dest / "index.html").unlink()
    proc = subprocess.run(
        [sys.executable, "-m", "compilekit", "report", str(dest)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert not (dest / others[0] / "index.html").exists()
    assert f'href="{others[0]}/result.json.gz"' in (dest / "index.html").read_text()
    # a published sweep publishes again (its gzipped maps read back and rederived), over an
    # earlier publication: what that one wrote goes, the user's own files there stay
    again = tmp_path / "again"
    again.mkdir()
    (again / publish.MARK).write_text('{"files": ["stale.txt", "old/cell.json"]}')
    for name in ("stale.txt", "notes.txt", "README.md"):
        (again / name).write_text(name)
    (again / "old").mkdir()
    (again / "old" / "cell.json").write_text("{}")
    proc = subprocess.run(
        [sys.executable, "-m", "compilekit", "publish", str(dest), str(again)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert (again / measured[0] / "kernels.json.gz").is_file()
    assert not (again / "stale.txt").exists() and not (again / "old").exists()
    assert (again / "notes.txt").read_text() == "notes.txt"
    assert (again / "README.md").read_text() == "README.md"
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".publishing")]
    # unchanged data, the same bytes: a republished folder leaves git's tree as it was
    ops = [(d / measured[0] / "ops.json.gz").read_bytes() for d in (again, dest)]
    assert ops[0] == ops[1]
    # the same report, but for its title (the folder's name)
    body = [(d / "REPORT.md").read_text().split("\n", 1)[1] for d in (again, dest)]
    assert body[0] == body[1]


def test_publish_takes_a_libraries_workspace_memset_off_the_roofline():
    """Published maps predate the longest-kernel rule: there cuBLAS's memset beside a bmm read
    as moving the bmm's 302 MB and doing its 17 GFLOP."""

    from compilekit.report import publish

    def record(name, launcher):
        return {"name": name, "launcher": launcher, "bytes": 301989888, "flops": 17179869184}

    records = [
        record("Memset (Device)", "aten::bmm"),
        record("nvjet_sm90_tst_256x128", "aten::bmm"),
        record("Memset (Device)", "aten::zero_"),
    ]
    publish.drop_side_memsets(records)
    assert [(r["bytes"], r["flops"]) for r in records] == [
        (None, None),
        (301989888, 17179869184),
        (301989888, 17179869184),
    ]


def test_publish_judges_host_bound_again_from_the_stored_figures(tmp_path):
    """A cell published before the host's pace counted: gluon-flash under default at
    2x32x4096x128 on the H200, 80% busy against a boosted-clock profile while its host issued
    each call in a fifth of the loop's time, read host-bound; republished, it is not."""
    from compilekit.model import result as results_mod
    from compilekit.model.store import write_json
    from compilekit.report import publish

    stale = results_mod.CellResult(
        variant="gluon-flash", mode="default", shape="2x32x4096x128", dtype="bfloat16",
        device="cuda", status="ok", eager_ms=0.509, compiled_ms=0.511,
        compiled_loop_ms=0.567, host_ms_per_call=0.115, profiled_forward_device_ms=0.452,
        gpu_busy_share=0.452 / 0.567, host_bound=True,
    )  # fmt: skip
    stale.save(str(tmp_path))
    kernel = {"name": "_gluon_attn_fwd_wsp", "device_ms": 0.452, "calls_per_forward": 1,
              "source_lines": [{"file": "variants/gluon_flash.py", "line": 1}]}  # fmt: skip
    write_json(str(tmp_path / "kernels.json"), {"kernels": [kernel]})
    assert publish.rederive(str(tmp_path), None)
    again = results_mod.load(str(tmp_path))
    assert again.host_bound is False and again.gpu_busy_share == stale.gpu_busy_share
    # the host pacing the loop: host-bound still, and nothing to write
    paced = dataclasses.replace(again, host_ms_per_call=0.56, host_bound=True)
    paced.save(str(tmp_path))
    assert not publish.rederive(str(tmp_path), None)
    assert results_mod.load(str(tmp_path)).host_bound is True
    # a share stored one rounding apart from the one derived again (a sum in another order)
    rounded = dataclasses.replace(paced, gpu_busy_share=math.nextafter(paced.gpu_busy_share, 1))
    rounded.save(str(tmp_path))
    assert not publish.rederive(str(tmp_path), None)


def test_publish_asks_again_whether_the_attention_rewrite_left_the_pattern(tmp_path):
    """A Llama block published with a note that its attention stayed matmul + softmax +
    matmul, read off its projections' mm and its SiLU's exp, where cuDNN's SDPA ran: the note
    goes once republished."""
    from compilekit.model import result as results_mod
    from compilekit.model.store import write_json
    from compilekit.report import publish

    stale = results_mod.CellResult(
        variant="llama-block", mode="default", shape="1x2048", dtype="bfloat16",
        device="cuda", status="ok", eager_ms=1.0, compiled_ms=0.9,
        attention_rewrite="Inductor's fuse_attention rewrite did not fire: the pattern stays",
    )  # fmt: skip
    stale.save(str(tmp_path))
    kernels = [
        {"name": "nvjet_sm90_tst_256x128", "aten_ops": ["aten.mm"]},
        {"name": "cudnn_generated_fort_native_sdpa_sm90_flash_fprop", "aten_ops": []},
        {"name": "triton_poi_fused__unsafe_view_mul_silu_5", "aten_ops": ["aten.exp"]},
    ]
    for kernel in kernels:
        kernel.update(device_ms=0.1, calls_per_forward=1, launcher="aten::mm", source_lines=[])
    write_json(str(tmp_path / "kernels.json"), {"kernels": kernels})
    assert publish.rederive(str(tmp_path), None)
    assert results_mod.load(str(tmp_path)).attention_rewrite is None


def _sweep_on_one_gpu(toml: str, tmp_path, monkeypatch, what, cores=True) -> tuple[list, list]:
    """The experiment in `toml` swept with eight processes on GPU "0" of a machine with cores
    to spare for it (cores) or not, each cell a 0.3 s sleep: its results, and what(cell) of
    the cells running each time one started."""
    import io
    import threading

    from compilekit.launch import sweep
    from compilekit.measure import locks
    from compilekit.model import result as results
    from compilekit.userexperiment import load_experiment

    path = tmp_path / "experiment.toml"
    path.write_text(toml)
    running, seen, lock = [], [], threading.Lock()

    def fake_launch(cell, out_dir, **_):
        with lock:
            running.append(what(cell))
            seen.append(list(running))
        time.sleep(0.3)
        with lock:
            running.remove(what(cell))
        return results.for_cell(cell, status="ok", compiled_ms=1.0)

    monkeypatch.setattr(sweep, "launch_or_record", fake_launch)
    plan = {"0": {locks.QUIET_ENV: "1", locks.BUSY_ENV: "0"}} if cores else None
    monkeypatch.setattr(locks, "core_plan", lambda gpus: plan)
    log = io.StringIO()
    done = sweep.run_sweep(
        load_experiment(str(path)), str(tmp_path / "out"), gpus=["0"], per_gpu=8, log=log
    )
    return done, seen, log.getvalue()


def test_a_gpu_runs_at_most_its_share_of_max_autotune_cells_and_others_beside_them(
    tmp_path, monkeypatch
):
    """Eight cell processes on one GPU, eight max-autotune cells and four eager ones: never more
    max-autotune cells at once than a GPU's share (their benchmarks queue for the GPU), the
    eager cells run beside them, and every cell gets its result."""
    from compilekit.launch import sweep

    monkeypatch.setattr(sweep, "AUTOTUNE_PER_GPU", 2)
    done, seen, _ = _sweep_on_one_gpu(
        'variants = ["naive", "sdpa"]\nmodes = ["eager", "max-autotune", '
        '"max-autotune-no-cudagraphs"]\nshapes = ["1x2x64x32", "1x2x96x32"]\ndevice = "cuda"\n',
        tmp_path,
        monkeypatch,
        lambda cell: cell.mode,
    )
    assert [r.status for r in done] == ["ok"] * 12
    autotuning = [sum(m.startswith("max-autotune") for m in now) for now in seen]
    assert max(autotuning) == 2, seen
    # the eager cells start while max-autotune ones run, not after the last of them
    assert any("eager" in now and "max-autotune" in now for now in seen), seen


def test_a_matrix_per_gpu_limit_keeps_its_cells_few_on_a_gpu(monkeypatch, tmp_path):
    """Cells of a matrix with per_gpu = 2 (a model that needs much of the GPU's memory) start
    only where their GPU runs fewer than two cells, and nothing else starts beside two; the
    other cells still run eight at once."""
    done, seen, _ = _sweep_on_one_gpu(
        'device = "cuda"\nmodes = ["eager", "default"]\n'
        '[[matrix]]\nvariants = ["naive", "inplace"]\nshapes = ["1x2x64x32", "1x2x96x32"]\n'
        '[[matrix]]\nvariants = ["sdpa"]\nshapes = ["1x2x64x32", "1x2x96x32"]\nper_gpu = 2\n',
        tmp_path,
        monkeypatch,
        lambda cell: cell.variant,
    )
    assert [r.status for r in done] == ["ok"] * 12
    assert all(len(now) <= 2 for now in seen if "sdpa" in now), seen
    assert max(len(now) for now in seen) == 8, seen  # the eight others at once


MIXED = (
    'modes = ["eager", "default"]\nshapes = ["1x2x64x32", "1x2x96x32"]\n'
    '[[matrix]]\nvariants = ["naive", "inplace", "sdpa"]\ndevice = "cuda"\n'
    '[[matrix]]\nvariants = ["naive"]\ndevice = "cpu"\n'
)


def test_a_cpu_cell_in_a_gpu_sweep_runs_with_no_other_cell_beside_it(tmp_path, monkeypatch):
    """Its kernels use every core and its timed calls must have them: no other cell runs while
    it does, and the CUDA cells still run eight at once."""
    done, seen, _ = _sweep_on_one_gpu(MIXED, tmp_path, monkeypatch, lambda c: c.label())
    assert [r.status for r in done] == ["ok"] * 16
    assert all(len(now) == 1 for now in seen if any(c.endswith("__cpu") for c in now)), seen
    assert max(len(now) for now in seen) == 8, seen


def test_a_machine_without_a_core_to_spare_per_gpu_runs_one_cell_at_a_time(tmp_path, monkeypatch):
    """No core of its own for a GPU's timed calls: cells would be timed beside other cells'
    compiles, so they run one at a time, and the sweep says why."""
    done, seen, log = _sweep_on_one_gpu(
        MIXED, tmp_path, monkeypatch, lambda c: c.label(), cores=False
    )
    assert [r.status for r in done] == ["ok"] * 16
    assert max(len(now) for now in seen) == 1, seen
    assert "too few to give each of 1 GPU(s) a core of its own" in log


def test_a_per_gpu_below_one_is_one_line(tmp_path):
    from compilekit.model.errors import UserError
    from compilekit.userexperiment import load_experiment

    path = tmp_path / "bad.toml"
    path.write_text('device = "cpu"\nvariants = ["naive"]\nmodes = ["eager"]\n'
                    'shapes = ["1x2x64x32"]\nper_gpu = 0\n')  # fmt: skip
    with pytest.raises(UserError, match="line 5: per_gpu must be at least 1 cell, not 0"):
        load_experiment(str(path))


def test_a_sweep_sums_the_seconds_its_cells_held_the_gpu_alone_in_every_process():
    """The sweep's floor on one GPU: each cell's own, cold and capture processes' holds, not
    their waits."""
    from types import SimpleNamespace

    from compilekit.launch.sweeprecord import summed_steps

    cells = [
        SimpleNamespace(steps_s={"gpu_alone_s": 1.5, "cold.gpu_alone_s": 2.0, "time": 9.0}),
        SimpleNamespace(steps_s={"capture.gpu_alone_s": 0.5, "gpu_lock_wait_s": 30.0}),
        SimpleNamespace(steps_s={}),
    ]
    assert summed_steps(cells, "gpu_alone_s") == 4.0
