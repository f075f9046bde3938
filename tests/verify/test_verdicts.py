"""One verdict per cell, decided once: statuses, FLOPs, the result record, and the order of
timing and evidence in the measuring process."""

import json
import statistics
import textwrap

import pytest

from compilekit.model import result as results
from compilekit.model.spec import parse_shape
from compilekit.model.store import CorruptFile


def _user(tmp_path, body: str, name: str = "mine.py") -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return str(path)


NAIVE_BODY = """
import math
import torch

def causal(q, k, v):
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    mask = torch.ones(s.shape[-2:], dtype=torch.bool, device=q.device).triu(1)
    return torch.softmax(s.masked_fill(mask, float("-inf")), dim=-1) @ v
"""


def test_a_buggy_variant_is_failed_not_unsupported(run_cell, tmp_path_factory):
    path = _user(tmp_path_factory.mktemp("bug"), "def attention(q, k, v):\n    return [q][3]\n")
    result = run_cell(f"{path}:attention", "eager")
    assert result.status == "failed", result
    assert "IndexError" in result.reason


def test_an_explicit_refusal_is_unsupported(run_cell, tmp_path_factory):
    path = _user(
        tmp_path_factory.mktemp("refuse"),
        """
        from compilekit.model.errors import Unsupported

        def attention(q, k, v):
            raise Unsupported("this kernel needs D >= 64")
        """,
    )
    result = run_cell(f"{path}:attention", "eager")
    assert result.status == "unsupported" and "needs D >= 64" in result.reason


OPAQUE_BODY = """
import torch

@torch.library.custom_op("mine::opaque", mutates_args=())
def opaque(x: torch.Tensor) -> torch.Tensor:
    return x.clone()

def attention(q, k, v):  # runs eagerly; Dynamo cannot trace it (the op has no fake kernel)
    return opaque(q)
"""


def test_a_declared_limit_of_a_mode_is_unsupported_and_names_both_reasons(
    run_cell, tmp_path_factory
):
    folder = tmp_path_factory.mktemp("limits")
    imports = folder / "imports.txt"  # one line per import of the file: the pid that ran it
    declared = _user(
        folder,
        OPAQUE_BODY
        + 'KNOWN_LIMITS = {"default": "opaque has no fake kernel for Dynamo"}\n'
        + f"import os\nwith open({str(imports)!r}, 'a') as f:\n    f.write(f'{{os.getpid()}}\\n')\n",
        "declared.py",
    )
    result = run_cell(f"{declared}:attention", "default")
    assert result.status == "unsupported", result
    assert result.reason.startswith("opaque has no fake kernel for Dynamo (torch: torch.compile")
    pids = imports.read_text().split()
    assert len(pids) == len(set(pids)), pids  # the limit was read without importing it again
    undeclared = _user(folder, OPAQUE_BODY, "undeclared.py")
    result = run_cell(f"{undeclared}:attention", "default")
    assert result.status == "failed" and result.reason.startswith("torch.compile failed")


@pytest.mark.parametrize(
    "limits", ['{"defualt": "typo"}', '{"default": ""}', '["default"]', '{"default": 1}']
)
def test_a_malformed_known_limits_is_a_user_error(tmp_path, limits):
    from compilekit.compile.variant import load_variant
    from compilekit.model.errors import UserError

    path = _user(tmp_path, NAIVE_BODY + f"KNOWN_LIMITS = {limits}\n")
    with pytest.raises(UserError, match="KNOWN_LIMITS in .* must map mode names"):
        load_variant(f"{path}:causal")


def test_wrong_shape_and_non_tensor_are_named(run_cell, tmp_path_factory):
    path = _user(
        tmp_path_factory.mktemp("shapes"),
        """
        def half(q, k, v):
            return q[..., : q.shape[-1] // 2]

        def pair(q, k, v):
            return q, k
        """,
    )
    half = run_cell(f"{path}:half", "eager")
    assert half.status == "wrong"
    assert "output shape (1, 4, 128, 16) != expected (1, 4, 128, 32)" in half.reason
    pair = run_cell(f"{path}:pair", "eager")
    assert pair.status == "failed" and "returned tuple, expected a Tensor" in pair.reason


def test_out_of_memory_says_how_much_and_what_to_do(run_cell, tmp_path_factory):
    path = _user(
        tmp_path_factory.mktemp("oom"),
        """
        import torch

        def attention(q, k, v):
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 12.00 GiB")
        """,
    )
    result = run_cell(f"{path}:attention", "eager")
    assert result.status == "failed"
    assert (
        "out of memory allocating 12.00 GiB" in result.reason and "smaller shape" in result.reason
    )


def test_user_variant_without_reference_is_only_self_consistent(run_cell, tmp_path_factory):
    folder = tmp_path_factory.mktemp("selfref")
    plain = _user(folder, NAIVE_BODY)
    with_ref = _user(folder, NAIVE_BODY + "\nreference = causal\n", "withref.py")
    fake = _user(folder, "def attention(q, k, v):\n    return v * 1.0\n", "fake.py")
    assert run_cell(f"{plain}:causal", "eager").status == "self-consistent"
    assert run_cell(f"{with_ref}:causal", "eager").status == "ok"
    # v * 1.0 agrees with itself; it is never "ok", and it has no FLOPs to credit
    fake_result = run_cell(f"{fake}:attention", "eager")
    assert fake_result.status == "self-consistent"
    assert fake_result.tflops is None and fake_result.flops is None


@pytest.mark.parametrize("causal, window, kv_heads", [(True, 0, 6), (True, 5, 2), (False, 0, 3)])
def test_the_reference_in_chunks_matches_torch_float64_attention(
    monkeypatch, causal, window, kv_heads
):
    """variants.masks.reference, computed a few heads at a time (here one (batch, head) pair
    per chunk), against torch's own float64 SDPA with the same mask written as a bool matrix:
    GQA, a sliding window, non-causal."""
    import torch
    import torch.nn.functional as F

    from compilekit.variants import masks

    monkeypatch.setattr(masks, "REFERENCE_CHUNK_BYTES", 1)  # one pair per chunk
    gen = torch.Generator().manual_seed(0)
    q = torch.randn(2, 6, 17, 8, generator=gen, dtype=torch.float64)
    k, v = (torch.randn(2, kv_heads, 17, 8, generator=gen, dtype=torch.float64) for _ in "kv")
    i, j = torch.arange(17)[:, None], torch.arange(17)[None, :]
    keep = torch.ones(17, 17, dtype=torch.bool)
    if causal:
        keep &= i >= j
    if window:
        keep &= (i - j) < window
    group = 6 // kv_heads
    truth = F.scaled_dot_product_attention(
        q, k.repeat_interleave(group, 1), v.repeat_interleave(group, 1), attn_mask=keep
    )
    out = masks.reference(q, k, v, causal=causal, window=window)
    assert torch.allclose(out, truth, rtol=0, atol=1e-12)


@pytest.mark.parametrize(
    "name, shape, pairs",
    [
        ("naive", "2x3x1024x64", 1024 * 1025 / 2),
        ("flex-window", "2x3x1024x64", 1024 * 256 - 256 * 255 / 2),
        ("triton-flash-window", "1x1x16384x64", 16384 * 256 - 256 * 255 / 2),
        ("flex-window", "1x1x100x64", 100 * 101 / 2),  # the window covers every key
        ("sdpa-gqa", "2x8x512x128", 512 * 513 / 2),  # every query head works
    ],
)
def test_flops_match_the_closed_form(name, shape, pairs):
    from compilekit.compile.variant import load_variant

    s = parse_shape(shape)
    expected = 4 * s.batch * s.heads * s.head_dim * pairs
    assert load_variant(name).flops(s) == pytest.approx(expected)


def test_window_variant_is_credited_for_the_window_only(run_cell):
    result = run_cell("flex-window", "eager", shape="1x4x512x32")
    assert result.status == "ok", result.reason
    window_pairs = 512 * 256 - 256 * 255 / 2
    assert result.flops == pytest.approx(4 * 4 * 32 * window_pairs)
    assert result.tflops == pytest.approx(result.flops / (result.compiled_ms * 1e-3) / 1e12)


def test_result_round_trip_and_bad_files(tmp_path):
    original = results.CellResult(
        "naive",
        "default",
        "1x2x64x32",
        "float32",
        "cpu",
        status="ok",
        compiled_ms=0.5,
        eager_timing={"median_ms": 1.0},
        dynamo={"recompiles": ["0/0: n == 2"]},
    )
    original.save(str(tmp_path))
    again = results.load(str(tmp_path))
    assert again.to_dict() == original.to_dict() and again.run_dir == str(tmp_path)
    (tmp_path / "result.json").write_text('{"variant": "naive", "mo')
    with pytest.raises(CorruptFile, match=r"result\.json is corrupt"):
        results.load(str(tmp_path))
    (tmp_path / "result.json").write_text(json.dumps({"format_version": 1, "ok": True}))
    with pytest.raises(CorruptFile, match="another compilekit format"):
        results.load(str(tmp_path))
    with pytest.raises(ValueError):
        results.CellResult("a", "b", "c", "d", "e", status="maybe").save(str(tmp_path))


SPY = """
import os, sys
import torch

LOG = {log!r}

def attention(q, k, v):
    with open(LOG, "a") as f:
        f.write("%d %d %d %d\\n" % (torch.autograd._profiler_enabled(), "depyf" in sys.modules,
                                    bool(os.environ.get("TORCH_TRACE")),
                                    q.dtype == torch.float64))  # the float64 reference
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)

reference = None
"""


def test_timed_calls_come_before_any_profiler_or_capture(run_cell, tmp_path_factory):
    folder = tmp_path_factory.mktemp("spy")
    log = folder / "calls.txt"
    path = _user(folder, SPY.format(log=str(log)))
    result = run_cell(f"{path}:attention", "eager")
    assert result.measured, result.reason
    calls = [tuple(map(int, line.split())) for line in log.read_text().splitlines()]
    first_profiled = next(i for i, c in enumerate(calls) if c[0])
    first_reference = next(i for i, c in enumerate(calls) if c[3])
    timed = result.eager_timing["samples"]
    # probe, check, burn-in, samples, then the float64 reference (a user's process has none
    # before its timed calls), and all of them before the first profiled call
    assert first_reference >= timed + 2
    assert first_profiled > first_reference
    assert not any(depyf or trace for _, depyf, trace, _ in calls[:first_profiled])
    assert result.processes.keys() == {"measure"}


def test_noise_rule():
    from compilekit.measure.steady import noise_note

    quiet = {"min_ms": 1.0, "p90_ms": 1.1}
    assert noise_note([quiet, quiet], load=0.5, cores=2) is None
    assert "p90 is 2.00x" in noise_note([quiet, {"min_ms": 1.0, "p90_ms": 2.0}], 0.5, 2)
    assert "load average 5.0 on 2 cores" in noise_note([quiet], load=5.0, cores=2)


# one variant shows both (each compiled cell costs ~25 s of the suite): a graph break, and a
# recompile because the guarded global STEP changes between calls
BREAKS_AND_RECOMPILES = """
import math
import torch

STEP = [0]

def attention(q, k, v):
    STEP[0] += 1
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]) * (1.0 if STEP[0] > 0 else 2.0)
    torch._dynamo.graph_break()
    return torch.softmax(s, dim=-1) @ v + 0 * STEP[0]

reference = None
"""


def test_graph_break_and_recompiles_are_shown(run_cell, tmp_path_factory):
    from compilekit.report import cellview

    folder = tmp_path_factory.mktemp("dynamo")
    path = _user(folder, BREAKS_AND_RECOMPILES, "breaks.py")
    result = run_cell(f"{path}:attention", "default")
    assert result.measured, result.reason
    assert result.dynamo["graph_breaks"], result.dynamo
    notes = cellview.cell_notes(result)
    assert any(line.startswith("graph breaks (") for line in notes), notes
    assert any("STEP" in reason for reason in result.dynamo["recompiles"]), result.dynamo
    assert any(line.startswith("recompiles (") for line in notes), notes
    # STEP changes on every call: past Dynamo's limit, attention runs eagerly, and a reader
    # must be told the compiled figure is partly eager
    assert any(
        hit.startswith("attention (breaks.py:") for hit in result.dynamo["recompile_limit_hit"]
    ), result.dynamo
    assert any("partly eager" in line for line in notes if "attention (breaks.py" in line), notes


def _fake_run(folder, name, kernels, shape="1x2x64x16"):
    run_dir = folder / name
    run_dir.mkdir()
    results.CellResult("naive", name, shape, "float32", "cpu", status="ok", compiled_ms=1.0).save(
        str(run_dir)
    )
    records = [
        {
            "name": n,
            "kind": "generated",
            "calls_per_forward": 1,
            "device_ms": ms,
            "share": 0.5,
            "aten_ops": [],
            "source_lines": [],
            "source_via": "none",
        }
        for n, ms in kernels
    ]
    (run_dir / "kernels.json").write_text(
        json.dumps(
            {
                "kernels": records,
                "kernels_per_forward": len(records),
                "forward_device_ms": sum(ms for _, ms in kernels),
                "by_source_line": [],
            }
        )
    )
    return str(run_dir)


def test_diff_rows_and_a_shape_mismatch(tmp_path):
    from compilekit.report import runview as report

    a = _fake_run(
        tmp_path,
        "a",
        [("cpp_fused_gone_0", 1.0), ("cpp_fused_kept_0", 1.0), ("cpp_fused_same_0", 1.0)],
    )
    b = _fake_run(
        tmp_path,
        "b",
        [("cpp_fused_kept_1", 2.0), ("cpp_fused_new_0", 0.5), ("cpp_fused_same_1", 1.05)],
    )
    rows = {
        line.split()[1]: line.split()[0]
        for line in report.diff_view(a, b).splitlines()
        if line.split() and line.split()[0] in ("vanished", "appeared", "changed")
    }
    # the per-graph counter (_0, _1) is not part of a kernel's identity
    assert rows == {
        "cpp_fused_gone": "vanished",
        "cpp_fused_new": "appeared",
        "cpp_fused_kept": "changed",
    }
    c = _fake_run(tmp_path, "c", [("cpp_fused_kept_0", 1.0)], shape="1x2x128x16")
    assert "differ in shape 1x2x64x16 vs 1x2x128x16" in report.diff_view(a, c)


def test_repeated_kernel_names_select_by_index(tmp_path, cli):
    run_dir = _fake_run(
        tmp_path, "r", [("aten::bmm", 1.0), ("cpp_fused_x_0", 1.0), ("aten::bmm", 3.0)]
    )
    proc = cli("kernels", run_dir, "--kernel", "aten::bmm")
    assert proc.returncode == 2 and "aten::bmm#0, aten::bmm#1" in proc.stderr
    proc = cli("kernels", run_dir, "--kernel", "aten::bmm#1")
    assert proc.returncode == 0 and "3.0000 ms/call" in proc.stdout


def test_report_says_nothing_to_plot_when_so(tmp_path):
    pytest.importorskip("matplotlib")
    from compilekit.report.sweepreport import report

    _fake_run(tmp_path, "eager", [("cpp_fused_x_0", 1.0)])  # no compiled cell, no series
    text = report(str(tmp_path))
    assert "nothing to plot" in text and "matplotlib not installed" not in text


def test_cache_key_closure_skips_installed_packages(tmp_path, monkeypatch):
    """A virtual environment inside the project must not pull installed sources (torch's
    thousands of files) into a variant's closure: they are versioned in the key instead."""
    from compilekit.compile import closure

    project = tmp_path / "proj"
    site = project / ".venv" / "lib" / "site-packages"
    (site / "fakepkg").mkdir(parents=True)
    (site / "fakepkg" / "__init__.py").write_text("import fakepkg.inner\n")
    (site / "fakepkg" / "inner.py").write_text("X = 1\n")
    (project / "helper.py").write_text("Y = 2\n")
    mine = project / "mine.py"
    mine.write_text("import fakepkg\nimport helper\nimport torch\n")
    monkeypatch.syspath_prepend(str(site))
    installed = closure._installed_dirs() + (str(site) + "/",)  # the real ones, and this one
    monkeypatch.setattr(closure, "_installed_dirs", lambda: installed)
    assert closure.import_closure(str(mine)) == sorted([str(mine), str(project / "helper.py")])


def test_verify_retimes_in_fresh_processes_and_flags_a_wrong_figure(run_cell, cli, tmp_path):
    import shutil

    result = run_cell("naive", "eager")
    proc = cli("verify", result.run_dir, "--repeat", "2", "--tolerance", "100")
    assert proc.returncode == 0, proc.stderr
    first, *more = proc.stdout.splitlines()
    assert first.startswith("within 10000%: naive__eager__") and "(perf_counter)" in first
    assert more[0].startswith("  2 fresh bare processes: ") and len(more) <= 4, proc.stdout
    # a run whose stored figure is 50x off must read OUTSIDE, exit 1
    doctored = tmp_path / "doctored"
    shutil.copytree(result.run_dir, doctored)
    bad = results.load(str(doctored))
    bad.compiled_ms *= 50
    bad.save(str(doctored))
    proc = cli("verify", str(doctored), "--repeat", "1", "--tolerance", "0.5")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert proc.stdout.startswith("OUTSIDE 50%: "), proc.stdout


def test_verify_is_inconclusive_when_the_bare_retimes_disagree(run_cell, monkeypatch):
    from compilekit.verify import check as verify

    result = run_cell("naive", "eager")
    ms = result.compiled_ms
    for bares, expected in (
        ([ms, ms * 1.01, ms * 0.99], "within"),
        ([ms * 2, ms * 2.02, ms * 1.98], "outside"),
        ([ms * 0.5, ms, ms * 1.6], "inconclusive"),  # the yardstick itself moved 3x
        ([ms * 0.9, ms, ms * 1.1], "inconclusive"),  # no two within 5% of one another's median
        ([ms, ms * 1.01, ms * 1.46], "within"),  # one disturbed process of three, outvoted
        ([ms * 0.7, ms * 0.71, ms], "outside"),  # the disturbed one is the toolkit's match
    ):
        times = iter(bares)
        monkeypatch.setattr(verify, "_bare_once", lambda c, env, calls: {"median_ms": next(times)})
        report, verdict = verify.verify(result.run_dir, 0.05, repeat=3)
        assert verdict == expected, report
        assert report.split(":")[0] == {"within": "within 5%", "outside": "OUTSIDE 5%",
                                        "inconclusive": "INCONCLUSIVE"}[expected]  # fmt: skip
        if bares[-1] == ms * 1.46:  # the reader is told what was outvoted
            assert "1 more than 5% from their median (disturbed), outvoted" in report, report
        if expected == "inconclusive":
            assert "no majority within 5% of their median: run again on a quiet machine" in report


def test_verify_judges_a_host_bound_run_by_a_users_loop(run_cell, tmp_path, monkeypatch):
    """do_bench's L2 flush lets a host-bound call read its device time in one process and its
    host cost in the next: such a run is judged by a user's loop of as many calls as its own,
    its loop median against the bare processes' loop medians, and the report says why."""
    import shutil

    from compilekit.model import result as results
    from compilekit.verify import check as verify

    run = tmp_path / "host_bound"
    shutil.copytree(run_cell("naive", "eager").run_dir, run)
    doctored = results.load(str(run))
    doctored.host_bound, doctored.gpu_busy_share = True, 0.2
    doctored.compiled_ms, doctored.compiled_loop_ms = 0.017, 0.049
    doctored.loop_timing = {"compiled": {"median_ms": 0.049, "calls": 42, "samples": 80}}
    doctored.save(str(run))
    asked = []

    def bare(cell, env, calls):
        asked.append(calls)
        return {"median_ms": 0.011 * (1 + len(asked)), "loop_ms": (0.0485, 0.048, 0.0487)[
            len(asked) - 1]}  # fmt: skip

    monkeypatch.setattr(verify, "_bare_once", bare)
    report, verdict = verify.verify(str(run), 0.05, repeat=3)
    assert verdict == "within" and asked == [42] * 3, report
    first, *more = report.splitlines()
    assert first.startswith("within 5%: ") and "toolkit 0.0490 ms, bare 0.0485 ms" in first
    assert "(a loop of 42 calls)" in first and len(more) <= 4, report
    assert any(ln.startswith("  host-bound (GPU busy 20%)") for ln in more), report
    asked.clear()
    doctored.compiled_loop_ms = 0.07  # 44% over the bare loops
    doctored.save(str(run))
    assert verify.verify(str(run), 0.05, repeat=3)[1] == "outside"


def test_bare_loop_gives_the_median_ms_per_call(monkeypatch):
    """The bare child's loops: ms per call of each loop, and their median."""
    import torch

    from compilekit.verify import bare

    clock = iter(range(1000))

    class Event:  # each loop "takes" the next number from the list below, per call
        def __init__(self, enable_timing):
            self.at = 0

        def record(self):
            self.at = next(clock)

        def synchronize(self):
            pass

        def elapsed_time(self, end):
            return float(per_loop[end.at // 2])

    per_loop = [9, 1, 8, 2, 7, 3, 6, 4, 5, 10, 11]
    monkeypatch.setattr(torch.cuda, "Event", Event)
    assert bare.bare_loop_ms(lambda: None, (), calls=1, repeats=11) == 6.0
    clock = iter(range(1000))
    per_loop = [4, 1, 3, 2]  # an even count: the mean of the middle two, as timing.summary
    assert bare.bare_loop_ms(lambda: None, (), calls=1, repeats=4) == 2.5


def test_loop_timing_is_time_per_call(monkeypatch):
    """A host-paced call (2 ms of host work, nothing on the device) costs 2 ms per call in a
    loop, however many calls the loop makes."""
    import time

    import torch

    from compilekit.measure import timing

    class Event:  # device events on a CPU machine: the host's clock stands in for the GPU's
        def __init__(self, enable_timing):
            self.at = None

        def record(self):
            self.at = time.perf_counter()

        def synchronize(self):
            pass

        def elapsed_time(self, end):
            return (end.at - self.at) * 1e3

    monkeypatch.setattr(torch.cuda, "Event", Event)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    loop = timing.loop_timing(lambda: time.sleep(2e-3), (), per_call_ms=0.1, budget_s=0.05)
    assert loop["calls"] == 20 and loop["samples"] >= 5, loop
    assert 2.0 <= loop["median_ms"] < 3.0, loop
    # every loop's ms per call, in order: the median is theirs
    assert len(loop["loops"]) == loop["samples"] and all(ms >= 2.0 for ms in loop["loops"])
    assert statistics.median(loop["loops"]) == pytest.approx(loop["median_ms"], abs=1e-5)


def test_host_cost_per_call_is_not_moved_by_one_disturbed_loop(monkeypatch):
    """The launch-only loop's figure is the median of its loops: a loop that another process's
    time slice stretched (here every call of the third loop takes 20x as long) does not move it:
    its mean would be 4.8 ms; the bound leaves the 1 ms sleeps room to overshoot on a busy
    machine (this one's did, past 1.5 ms, in a full test run)."""
    import time

    import torch

    from compilekit.measure import timing

    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    calls = []

    def call():
        calls.append(None)
        slow = 11 <= len(calls) <= 15  # loop 3 of 5 (after one warm-up call), 5 calls a loop
        time.sleep(20e-3 if slow else 1e-3)

    host = timing.host_ms_per_call(call, (), calls=5, loops=5)
    assert len(calls) == 26 and 1.0 <= host < 3.0, host


def test_a_host_loop_of_a_long_call_queues_little_gpu_work():
    """The launch-only loop queues its calls without waiting: 50 calls of a 10 ms kernel would
    hold the GPU half a second per loop, ten loops per timing. A loop stays near 20 ms of GPU
    work, never under 10 calls (a host figure needs a few), and short calls keep 50, as the
    bare child's host loop has them."""
    from compilekit.measure.timing import host_calls

    for per_call_ms in (0.005, 0.06, 0.4, 1.3, 2.6, 9.9, 40.0):
        calls = host_calls(per_call_ms)
        assert 10 <= calls <= 50, (per_call_ms, calls)
        assert calls * per_call_ms <= max(21.0, 10 * per_call_ms), (per_call_ms, calls)
    assert host_calls(0.06) == 50


def test_a_check_keeps_its_raw_figures_beside_the_run(run_cell, tmp_path, monkeypatch):
    """Each verify appends what it measured to the run's verify.json (every bare process's
    figures, what others used of the CPU meanwhile), so a verdict can be re-read, not only its
    report; a run directory that cannot be written keeps the verdict and says the figures were
    lost."""
    import json
    import shutil

    from compilekit.model import store
    from compilekit.verify import check as verify

    run = tmp_path / "run"
    shutil.copytree(run_cell("naive", "eager").run_dir, run)
    (run / "verify.json").unlink(missing_ok=True)  # other tests' checks of the shared run
    figures = [{"median_ms": 1.00}, {"median_ms": 1.01}, {"median_ms": 0.99}]
    bares = iter(figures)
    monkeypatch.setattr(verify, "_bare_once", lambda c, env, calls: next(bares))
    report, verdict = verify.verify(str(run), 100.0, repeat=3)
    (entry,) = json.loads((run / "verify.json").read_text())
    assert (entry["verdict"], "\n".join(entry["report"])) == (verdict, report)
    assert entry["bare"] == figures and entry["key"] == "median_ms"

    def refuse(path, data):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(store, "write_json", refuse)
    bares = iter([{"median_ms": 1.0}] * 3)
    report, again = verify.verify(str(run), 100.0, repeat=3)
    assert again == verdict and report.endswith("verify.json: Permission denied"), report


def _timing(median, low, p90):
    return {"median_ms": median, "p10_ms": low, "p90_ms": p90, "min_ms": low, "samples": 100}


def _time_with(monkeypatch, benches, load=0.0, pinned=False, alone=None):
    """Run steady.time_cell with timing.bench answering `benches` (eager, compiled; timed
    compiled first), the load average `load`, on a thread pinned to some cores or not."""
    import os
    import types

    from compilekit.measure import steady, timing
    from compilekit.model.result import CellResult

    answers = iter([benches[1], benches[0]])
    monkeypatch.setattr(timing, "bench", lambda fn, args, device: next(answers))
    monkeypatch.setattr(os, "getloadavg", lambda: (load, load, load), raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    monkeypatch.setattr(steady, "_pinned", lambda: pinned)
    spec = types.SimpleNamespace(device="cpu", mode="default", shape=None)
    variant = types.SimpleNamespace(attention=None, flops=None)
    result = CellResult(
        variant="v", mode="default", shape="1x1x8x8", dtype="float32", device="cpu"
    )
    steady.time_cell(spec, variant, None, (), result, alone and alone())
    return result


def test_a_disturbed_timing_is_flagged_with_its_reason_and_reported(monkeypatch, tmp_path):
    """A wide spread marks the cell noisy, taken once: its figure stays, with the note in the
    run's notes and in a sweep's "Timings that may be disturbed"; a tight one is clean."""
    quiet, disturbed = _timing(1.0, 0.98, 1.05), _timing(1.6, 0.99, 2.4)
    clean = _time_with(monkeypatch, [quiet, _timing(0.5, 0.49, 0.52)])
    assert clean.compiled_ms == 0.5 and not clean.noisy and clean.noise_note is None
    result = _time_with(monkeypatch, [quiet, disturbed])
    assert result.compiled_ms == 1.6 and result.noisy
    assert result.noise_note == "p90 is 2.42x the fastest sample"
    from compilekit.report import cellview, sweepreport

    line = "noisy timing: p90 is 2.42x the fastest sample; run the cell again on a quiet machine"
    assert line in cellview.cell_notes(result)
    result.status, result.label = "ok", "v__default__1x1x8x8__float32__cpu"
    cell_dir = tmp_path / result.label
    cell_dir.mkdir()
    result.save(str(cell_dir))
    sweepreport.report(str(tmp_path))
    disturbed = (tmp_path / "REPORT.md").read_text().split("## Timings that may be disturbed")[1]
    assert "`v` / `default` / 1x1x8x8: p90 is 2.42x the fastest sample" in disturbed


def test_a_compiled_cells_eager_baseline_apart_from_the_eager_cell_is_reported(tmp_path):
    """In an H100 sweep a reduce-overhead cell's own eager baseline read 1.855 ms where the
    sweep's eager cell of the same block read 1.043 (other cells compiled on the host beside
    it), and its speedup said 4.90x: the report gives both figures and the speedup against the
    eager cell. 1.1x apart, or another allocator's eager cell, says nothing."""
    from compilekit.model.result import CellResult
    from compilekit.report import sweepreport

    def cell(mode, eager_ms, compiled_ms, alloc=""):
        r = CellResult(
            variant="v", mode=mode, shape="1x1x8x8", dtype="float32", device="cpu",
            alloc=alloc, status="ok", eager_ms=eager_ms, compiled_ms=compiled_ms,
            speedup=eager_ms / compiled_ms,
        )  # fmt: skip
        r.label = f"v__{mode}__1x1x8x8__float32__cpu" + (f"__alloc-{alloc}" if alloc else "")
        (tmp_path / r.label).mkdir()
        r.save(str(tmp_path / r.label))

    cell("eager", 1.043, 1.043)
    cell("reduce-overhead", 1.855, 0.3785)
    cell("default", 1.15, 0.3821)  # 1.10x its eager cell
    cell("default", 1.855, 0.3785, alloc="expandable")  # no eager cell of its allocator
    sweepreport.report(str(tmp_path))
    disturbed = (tmp_path / "REPORT.md").read_text().split("## Timings that may be disturbed")[1]
    lines = [line for line in disturbed.splitlines() if line.startswith("- ")]
    assert len(lines) == 1 and lines[0].startswith("- `v` / `reduce-overhead` / 1x1x8x8:"), lines
    assert "read 1.855 ms per call, the eager cell of this workload 1.043 (1.78x" in lines[0]
    assert "its speedup is 4.90x against the first, 2.76x against the second" in lines[0]


def test_a_loaded_machine_marks_a_timing_unless_it_ran_on_a_core_of_its_own(monkeypatch):
    """A load average over the cores says another process competed; a thread pinned to a core
    of its own (a sweep's quiet core) is judged by its spread alone: the machine's load, the
    other cells' compiles, says nothing of that core."""
    quiet = _timing(1.0, 0.99, 1.0)
    loaded = _time_with(monkeypatch, [quiet, quiet], load=5.0)
    assert loaded.noisy and loaded.noise_note == "load average 5.0 on 2 cores"
    assert not _time_with(monkeypatch, [quiet, quiet], load=5.0, pinned=True).noisy


def test_the_timed_calls_hold_what_they_need_alone_once(monkeypatch):
    """In a sweep the timed calls hold the GPU (and a core) alone, once, around all of them."""
    import contextlib

    events = []

    @contextlib.contextmanager
    def alone():
        events.append("take")
        yield
        events.append("let go")

    quiet, disturbed = _timing(1.0, 0.98, 1.05), _timing(1.6, 0.99, 2.4)
    _time_with(monkeypatch, [quiet, disturbed], alone=alone)
    assert events == ["take", "let go"], events


def test_the_timed_calls_follow_the_bare_childs_order(monkeypatch):
    """The compiled callable is timed first, as `compilekit verify`'s bare child times it
    (do_bench, a user's loop, the host's cost), then eager, the comparison; an eager cell
    times its one callable once."""
    import types

    from compilekit.measure import steady as steady_mod
    from compilekit.measure import timing

    calls = []

    def record(what, answer):
        return lambda fn, *a, **k: calls.append((what, fn)) or answer

    monkeypatch.setattr(timing, "bench", record("do_bench", _timing(1.0, 0.9, 1.1)))
    monkeypatch.setattr(timing, "loop_timing", record("loop", _timing(1.2, 1.1, 1.3)))
    monkeypatch.setattr(timing, "host_loops", record("host", {"median_ms": 0.05}))
    variant = types.SimpleNamespace(attention="eager")
    spec = types.SimpleNamespace(device="cuda", mode="default")
    eager, steady, host, loops = steady_mod.timed_calls(spec, variant, "compiled", (), True)
    assert calls == [
        ("do_bench", "compiled"), ("loop", "compiled"), ("host", "compiled"),
        ("do_bench", "eager"), ("loop", "eager"),
    ]  # fmt: skip
    assert host == 0.05 and set(loops) == {"compiled", "eager", "host"} and eager and steady
    calls.clear()
    spec.mode = "eager"
    eager, steady, _, loops = steady_mod.timed_calls(spec, variant, "eager", (), True)
    assert calls == [("do_bench", "eager"), ("loop", "eager"), ("host", "eager")]
    assert eager is steady and loops["eager"] is loops["compiled"]


def test_a_host_bound_note_compares_eager_and_compiled_in_a_loop():
    """Compiled sdpa at 1x4x128x64 on the H200: do_bench reads about 2x eager, a loop 2.7x;
    GPU busy is the device time over the loop's time per call, not over do_bench's figure."""
    from compilekit.evidence.diagnose import busy_share
    from compilekit.model.result import CellResult
    from compilekit.report.cellview import cell_notes

    share, host_bound = busy_share(0.009, 0.048)
    result = CellResult(
        variant="sdpa", mode="default", shape="1x4x128x64", dtype="bfloat16", device="cuda",
        status="ok", eager_ms=0.0088, compiled_ms=0.017, eager_loop_ms=0.0192,
        compiled_loop_ms=0.048, profiled_forward_device_ms=0.009, host_ms_per_call=0.046,
        gpu_busy_share=share, host_bound=host_bound,
        loop_timing={"eager": {"median_ms": 0.0192}, "compiled": {"median_ms": 0.048}},
    )  # fmt: skip
    (note,) = [n for n in cell_notes(result) if n.startswith("host-bound")]
    assert "GPU busy 19% of each call in a loop (0.009 of 0.048 ms)" in note, note
    assert "eager 0.019 vs compiled 0.048 ms per call (0.40x)" in note, note
    assert "reads 0.009 vs 0.017" in note, note
    assert "the host spends 0.046 ms issuing a call: launches" in note, note
    assert busy_share(0.009, 0.0095) == (0.009 / 0.0095, False)


def test_a_gpu_idle_while_the_host_is_far_ahead_is_not_host_bound():
    """gluon-flash under default at 2x32x4096x128 on the H200: the profile's kernel took
    0.452 ms at a boosted clock, a long loop 0.567 ms a call at the power-capped one (80%
    busy), while the host issued each call in 0.115 ms. At 8x16x1024x64 the host's 0.081 ms
    a call paced the loop's 0.084."""
    from compilekit.evidence.diagnose import busy_share

    assert busy_share(0.452, 0.567, 0.115) == (0.452 / 0.567, False)
    assert busy_share(0.0556, 0.0835, 0.0813) == (0.0556 / 0.0835, True)
    assert busy_share(0.0556, 0.0835) == (0.0556 / 0.0835, True)  # no host figure: the share


def test_a_host_bound_cells_worth_comes_from_a_loop():
    """do_bench says naive reduce-overhead beats eager at a tiny shape (its L2 flush hides host
    time); a loop, which pays the host, says it does not: the table, the cell summary and the
    sweep page's colour follow the loop, for a host-bound cell only."""
    import dataclasses

    from compilekit.model.result import CellResult
    from compilekit.report import sweeppage, worth
    from compilekit.report.cellview import cell_summary

    def spread(median):
        return {"median_ms": median, "p10_ms": median * 0.98, "p90_ms": median * 1.02}

    result = CellResult(
        variant="naive", mode="reduce-overhead", shape="1x4x128x64", dtype="bfloat16",
        device="cuda", status="ok", max_rel_err=1e-3, eager_max_rel_err=1e-3,
        eager_ms=0.040, compiled_ms=0.025, speedup=1.6, compile_cold_s=20.0, compile_warm_s=3.0,
        eager_timing=spread(0.040), compiled_timing=spread(0.025),
        loop_timing={"eager": spread(0.050), "compiled": spread(0.060)},
        eager_loop_ms=0.050, compiled_loop_ms=0.060, gpu_busy_share=0.3, host_bound=True,
        profiled_forward_device_ms=0.018, host_ms_per_call=0.058,
    )  # fmt: skip
    assert worth.break_even_calls(20.0, result) is None
    assert worth.speedup_text(result) == "0.83 loop"
    assert "speedup 0.83x in a loop (host-bound; do_bench's 1.60x" in cell_summary(result)
    assert sweeppage.speed_class(result) == "slow1"
    device_bound = dataclasses.replace(result, host_bound=False, gpu_busy_share=0.9)
    assert worth.speedup_text(device_bound) == "1.60"
    assert worth.break_even_calls(20.0, device_bound) == 1_333_334
    assert sweeppage.speed_class(device_bound) == "fast2"


def test_a_compiled_cell_whose_eager_runs_out_of_memory_is_checked_and_timed_compiled(
    run_cell, tmp_path_factory
):
    """flex's eager path at 4x16x16384 needs more memory than an H200 has, its compiled call
    does not: such a cell is checked against the reference and timed compiled alone, with no
    eager figure, no speedup and a note that says why; the eager cell itself still fails."""
    from compilekit.report import cellview

    path = _user(
        tmp_path_factory.mktemp("eageroom"),
        """
        import torch
        import torch.nn.functional as F

        def attention(q, k, v):
            if not torch.compiler.is_compiling():
                raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 64.00 GiB")
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)

        def reference(q, k, v):
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)
        """,
    )
    result = run_cell(f"{path}:attention", "default")
    assert result.status == "ok", result.reason
    assert result.compiled_ms > 0 and result.max_rel_err < 1e-3
    assert result.eager_ms is None and result.speedup is None and result.eager_max_rel_err is None
    assert result.eager_note.startswith("eager could not run (")
    assert "out of memory allocating 64.00 GiB" in result.eager_note
    assert (
        result.compile_cold_s > 0
    )  # the cold process (compile and capture) went on past eager too
    summary = cellview.cell_summary(result)
    assert f"latency     compiled {result.compiled_ms:.3f} ms; eager could not run" in summary
    row = dict(zip(cellview.headers([result]), cellview.rows([result], None)[0]))
    assert (row["eager_ms"], row["speedup"], row["break_even_cold"]) == ("-", "-", "-")
    assert result.eager_note in cellview.cell_notes(result)
    # on a GPU such a cell may be host-bound: a compiled loop, and no eager one beside it
    result.host_bound, result.gpu_busy_share, result.host_ms_per_call = True, 0.3, 0.05
    result.profiled_forward_device_ms, result.compiled_loop_ms = 0.02, 0.06
    result.loop_timing = {"compiled": {"median_ms": 0.06, "calls": 40}}
    row = dict(zip(cellview.headers([result]), cellview.rows([result], None)[0]))
    assert (row["speedup"], row["break_even_warm"]) == ("-", "-")
    assert "host-bound: GPU busy 30% of each call in a loop" in "\n".join(
        cellview.cell_notes(result)
    )
    assert "eager could not run" in cellview.cell_summary(result)
    eager = run_cell(f"{path}:attention", "eager")
    assert eager.status == "failed" and "out of memory allocating 64.00 GiB" in eager.reason
