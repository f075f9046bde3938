"""One verdict per cell, decided once: statuses, FLOPs, the result record, and the order of
timing and evidence in the measuring process."""

import json
import textwrap

import pytest

from compilekit import result as results
from compilekit.spec import parse_shape
from compilekit.store import CorruptFile


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
        from compilekit.errors import Unsupported

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
    from compilekit.errors import UserError
    from compilekit.variant import load_variant

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

    from variants import masks

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
    from compilekit.variant import load_variant

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
    from compilekit.cell import noise_note

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
    from compilekit import report

    folder = tmp_path_factory.mktemp("dynamo")
    path = _user(folder, BREAKS_AND_RECOMPILES, "breaks.py")
    result = run_cell(f"{path}:attention", "default")
    assert result.measured, result.reason
    assert result.dynamo["graph_breaks"], result.dynamo
    notes = report.cell_notes(result)
    assert any(line.startswith("graph breaks:") for line in notes), notes
    assert any("STEP" in reason for reason in result.dynamo["recompiles"]), result.dynamo
    assert any(line.startswith("recompiles (") for line in notes), notes


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
    from compilekit import report

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
    from compilekit.sweepreport import report

    _fake_run(tmp_path, "eager", [("cpp_fused_x_0", 1.0)])  # no compiled cell, no series
    text = report(str(tmp_path))
    assert "nothing to plot" in text and "matplotlib not installed" not in text


def test_cache_key_closure_skips_installed_packages(tmp_path, monkeypatch):
    """A virtual environment inside the project must not pull installed sources (torch's
    thousands of files) into a variant's closure: they are versioned in the key instead."""
    from compilekit import variant

    project = tmp_path / "proj"
    site = project / ".venv" / "lib" / "site-packages"
    (site / "fakepkg").mkdir(parents=True)
    (site / "fakepkg" / "__init__.py").write_text("import fakepkg.inner\n")
    (site / "fakepkg" / "inner.py").write_text("X = 1\n")
    (project / "helper.py").write_text("Y = 2\n")
    mine = project / "mine.py"
    mine.write_text("import fakepkg\nimport helper\nimport torch\n")
    monkeypatch.syspath_prepend(str(site))
    installed = variant._installed_dirs() + (str(site) + "/",)  # the real ones, and this one
    monkeypatch.setattr(variant, "_installed_dirs", lambda: installed)
    assert variant.import_closure(str(mine)) == sorted([str(mine), str(project / "helper.py")])


def test_verify_retimes_in_fresh_processes_and_flags_a_wrong_figure(run_cell, cli, tmp_path):
    import shutil

    result = run_cell("naive", "eager")
    proc = cli("verify", result.run_dir, "--repeat", "2", "--tolerance", "100")
    assert proc.returncode == 0, proc.stderr
    assert "bare perf_counter" in proc.stdout and "median of 2 fresh processes" in proc.stdout
    # a run whose stored figure is 50x off must read OUTSIDE, exit 1
    doctored = tmp_path / "doctored"
    shutil.copytree(result.run_dir, doctored)
    bad = results.load(str(doctored))
    bad.compiled_ms *= 50
    bad.save(str(doctored))
    proc = cli("verify", str(doctored), "--repeat", "1", "--tolerance", "0.5")
    assert proc.returncode == 1 and "OUTSIDE 50%" in proc.stdout, proc.stdout + proc.stderr


def test_verify_is_inconclusive_when_the_bare_retimes_disagree(run_cell, monkeypatch):
    from compilekit import verify

    result = run_cell("naive", "eager")
    ms = result.compiled_ms
    for bares, expected in (
        ([ms, ms * 1.01, ms * 0.99], "within"),
        ([ms * 2, ms * 2.02, ms * 1.98], "outside"),
        ([ms * 0.5, ms, ms * 1.6], "inconclusive"),  # the yardstick itself moved 3x
    ):
        times = iter(bares)
        monkeypatch.setattr(
            verify, "_bare_once", lambda c, env, calls, repeats: {"median_ms": next(times)}
        )
        line, verdict = verify.verify(result.run_dir, 0.05, repeat=3)
        assert verdict == expected, line
    assert "INCONCLUSIVE" in line and "disagree among themselves" in line


def test_an_inconclusive_verify_names_a_cpu_that_changed_speed(run_cell, tmp_path, monkeypatch):
    """The H200's VM host ran a Python loop at 51-103 ns per step minutes apart (2026-12-01):
    bare re-times that disagree because their CPU did are named as such, and every line says
    what speed the toolkit's and the bare processes' CPU had."""
    import shutil

    from compilekit import verify

    run = tmp_path / "run"
    shutil.copytree(run_cell("naive", "eager").run_dir, run)
    doctored = results.load(str(run))
    doctored.cpu_use = {"loop_ns": [52.0, 53.0]}
    doctored.save(str(run))
    ms = doctored.compiled_ms
    for speeds, why in (
        (
            [51.0, 102.0, 75.0],
            "(the CPU itself ran at 51-103 ns per step of a Python loop across them)",
        ),
        ([51.0, 52.0, 51.5], "(a noisy machine)"),
    ):
        bares = iter(zip([ms * 0.5, ms, ms * 1.6], speeds))

        def bare(c, env, calls, repeats):
            median, speed = next(bares)
            return {"median_ms": median, "loop_ns": [speed, speed + 1]}

        monkeypatch.setattr(verify, "_bare_once", bare)
        line, verdict = verify.verify(str(run), 0.05, repeat=3)
        assert verdict == "inconclusive" and why in line, line
    assert line.endswith("; CPU speed, ns per Python loop step: toolkit 52-53, bare 51-53"), line


def test_verify_judges_a_host_bound_run_by_its_fastest_loops(run_cell, tmp_path, monkeypatch):
    """do_bench's L2 flush lets a host-bound call read its device time in one process and its
    host cost in the next, and a loop's median reads the CPU's speed of the moment: such a run
    is judged by the fastest tenth of as many loops of the same length as its own."""
    import shutil

    from compilekit import result as results
    from compilekit import verify

    run = tmp_path / "host_bound"
    shutil.copytree(run_cell("naive", "eager").run_dir, run)
    doctored = results.load(str(run))
    doctored.host_bound, doctored.gpu_busy_share = True, 0.2
    # the run's loops: fast tenth 0.046, but the CPU ran slow for most of them (median 0.069)
    doctored.compiled_ms, doctored.compiled_loop_ms = 0.017, 0.069
    doctored.loop_timing = {
        "compiled": {"median_ms": 0.069, "p10_ms": 0.046, "calls": 42, "samples": 80}
    }
    doctored.host_ms_per_call = 0.066
    doctored.save(str(run))
    asked = []

    def bare(cell, env, calls, repeats):
        asked.append((calls, repeats))
        host = (0.047, 0.045, 0.046)[len(asked) - 1]
        return {
            "median_ms": 0.011 * (1 + len(asked)),
            "loop_ms": 0.0485,
            "loop_p10_ms": 0.0455,
            "host_ms": host,
        }

    monkeypatch.setattr(verify, "_bare_once", bare)
    line, verdict = verify.verify(str(run), 0.05, repeat=3)
    assert verdict == "within" and asked == [(42, 80)] * 3, line
    assert "host-bound (GPU busy 20%)" in line and "bare loop p10 0.0455" in line, line
    assert "loop medians: toolkit 0.0690 ms, bare 0.0485 ms" in line, line
    assert line.endswith("; host per call: toolkit 0.0660 ms, bare 0.0450-0.0470 ms"), line
    asked.clear()
    doctored.loop_timing["compiled"]["p10_ms"] = 0.065  # every loop 43% over the bare ones
    doctored.save(str(run))
    assert verify.verify(str(run), 0.05, repeat=3)[1] == "outside"


def test_loops_are_compared_at_the_same_cpu_speed():
    """The H200's vCPU switches between about 45 and 80 ns per probe step: only loops run at the
    fastest speed either side saw are compared, so a process that spent most of its loops slow
    is not blamed, one that never ran fast gives no figure, and a cost added to every call
    still shows."""
    from compilekit import samespeed

    def loops(fast_ms, fast, slow):  # a process's loops: `fast` at 45 ns, `slow` at 80
        return [[fast_ms, 45.0 + i % 3] for i in range(fast)] + [[fast_ms * 1.7, 80.0]] * slow

    toolkit = loops(0.046, 8, 72)  # mostly slow: its median and p10 read the slow speed
    bares = [loops(0.045, 60, 20), loops(0.047, 0, 80), loops(0.046, 40, 40)]
    got = samespeed.match(toolkit, bares)
    assert got.toolkit_ms == 0.046 and got.bare_ms == [0.045, None, 0.046], got
    assert got.limit_ns == pytest.approx(45 * samespeed.FAST_BAND)
    assert samespeed.counts_text(got) == "toolkit 8 of 80 loops, bare 60, 0, 40 of 80"
    # a toolkit that adds 20% to every call reads 20% over at the fast speed too
    assert samespeed.match(loops(0.055, 8, 72), bares).toolkit_ms == 0.055
    # four fast loops are too few to stand for the fast speed
    assert samespeed.match(loops(0.046, 4, 76), bares).toolkit_ms is None


def test_verify_judges_host_bound_loops_at_the_same_cpu_speed(run_cell, tmp_path, monkeypatch):
    """A host-bound run whose loops carry the CPU's speed is judged by its loops at the fast
    speed against the bare processes' loops at that speed: within where they match though
    the run's median and p10 read the slow speed, outside where every fast loop costs 20%
    more, inconclusive where the run never had the fast speed."""
    import shutil

    from compilekit import result as results
    from compilekit import verify

    run = tmp_path / "host_bound"
    shutil.copytree(run_cell("naive", "eager").run_dir, run)
    doctored = results.load(str(run))
    doctored.host_bound, doctored.gpu_busy_share = True, 0.1

    def save(fast_ms, fast):
        loops = [[fast_ms, 45.0]] * fast + [[0.080, 80.0]] * (80 - fast)
        doctored.compiled_ms, doctored.compiled_loop_ms = 0.02, 0.080
        doctored.loop_timing = {
            "compiled": {"median_ms": 0.080, "p10_ms": 0.080 if fast < 8 else fast_ms,
                         "calls": 42, "samples": 80, "loops": loops}
        }  # fmt: skip
        doctored.save(str(run))

    bare_fast = iter(lambda: 30, None)  # fast loops per bare process, in the order started

    def bare(cell, env, calls, repeats):
        fast = next(bare_fast)
        loops = [[0.046, 46.0]] * fast + [[0.079, 81.0]] * (repeats - fast)
        return {"median_ms": 0.02, "loop_ms": 0.079, "loop_p10_ms": 0.046, "loops": loops}

    monkeypatch.setattr(verify, "_bare_once", bare)
    save(0.046, 6)  # 6 of 80 loops fast: p10 reads the slow speed, 74% over the bare p10
    line, verdict = verify.verify(str(run), 0.05, repeat=3)
    assert verdict == "within", line
    assert "toolkit 0.0460 ms, bare 0.0460 ms (median of 3 fresh processes" in line, line
    assert (
        "at most 52 ns per step of a Python loop: toolkit 6 of 80 loops, bare 30, 30, 30" in line
    )
    save(0.0552, 10)  # every fast loop 20% over the bare ones
    assert verify.verify(str(run), 0.05, repeat=3)[1] == "outside"
    save(0.046, 3)
    line, verdict = verify.verify(str(run), 0.05, repeat=3)
    assert verdict == "inconclusive" and "the toolkit's process ran fewer than 5" in line, line
    # one bare process of three with the fast speed: it cannot show that bare processes agree,
    # so a 20% gap to it is no verdict either way
    save(0.0552, 10)
    bare_fast = iter([2, 30, 0])
    line, verdict = verify.verify(str(run), 0.05, repeat=3)
    assert verdict == "inconclusive" and "only 1 of 3 bare processes ran 5 loops" in line, line
    bare_fast = iter([2, 30, 30])
    assert verify.verify(str(run), 0.05, repeat=3)[1] == "outside"


def test_bare_loop_gives_the_median_and_the_fastest_tenth(monkeypatch):
    """The bare child's loops: ms per call, their median and their fastest tenth."""
    import torch

    from compilekit import verify

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

    from compilekit import cpuwatch

    per_loop = [9, 1, 8, 2, 7, 3, 6, 4, 5, 10]
    speeds = iter([45.0, 80.0] * 5)
    monkeypatch.setattr(torch.cuda, "Event", Event)
    monkeypatch.setattr(cpuwatch, "quick_loop_ns", lambda: next(speeds))
    got = verify.bare_loop(lambda: None, (), calls=1, repeats=10)
    assert (got["loop_ms"], got["loop_p10_ms"]) == (6.0, 2.0), got
    # each loop beside the speed the probe read before it, in the order taken
    assert got["loops"] == [[float(ms), ns] for ms, ns in zip(per_loop, [45.0, 80.0] * 5)]


def test_loop_timing_is_time_per_call(monkeypatch):
    """A host-paced call (2 ms of host work, nothing on the device) costs 2 ms per call in a
    loop, however many calls the loop makes."""
    import time

    import torch

    from compilekit import timing

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
    from compilekit import cpuwatch

    speeds = iter(range(40, 1000))  # each probe reads one more ns than the last
    monkeypatch.setattr(cpuwatch, "quick_loop_ns", lambda: float(next(speeds)))
    loop = timing.loop_timing(lambda: time.sleep(2e-3), (), per_call_ms=0.1, budget_s=0.05)
    assert loop["calls"] == 20 and loop["samples"] >= 5, loop
    assert 2.0 <= loop["median_ms"] < 3.0, loop
    # every loop, in order, beside the CPU speed read just before it (compilekit/samespeed.py)
    assert [ns for _, ns in loop["loops"]] == list(range(40, 40 + loop["samples"])), loop
    assert sorted(ms for ms, _ in loop["loops"])[len(loop["loops"]) // 2] == pytest.approx(
        loop["median_ms"], abs=1e-5
    )


def test_host_cost_per_call_is_not_moved_by_one_disturbed_loop(monkeypatch):
    """The launch-only loop's figure is the median of its loops: a loop that another process's
    time slice stretched (here every call of the third loop takes 20x as long) does not move it:
    its mean would be 4.8 ms; the bound leaves the 1 ms sleeps room to overshoot on a busy
    machine (this one's did, past 1.5 ms, in a full test run)."""
    import time

    import torch

    from compilekit import timing

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
    from compilekit.timing import host_calls

    for per_call_ms in (0.005, 0.06, 0.4, 1.3, 2.6, 9.9, 40.0):
        calls = host_calls(per_call_ms)
        assert 10 <= calls <= 50, (per_call_ms, calls)
        assert calls * per_call_ms <= max(21.0, 10 * per_call_ms), (per_call_ms, calls)
    assert host_calls(0.06) == 50


def test_host_loops_are_compared_with_a_users_loop_at_the_same_cpu_speed(monkeypatch):
    """The host's cost per call and a user's loop are taken a moment apart; on the H200's VM
    hosts the CPU's speed may differ between them by 1.6x (2026-12-01: a compiled sdpa loop of
    0.075 ms against a host cost of 0.106 ms). Each host loop carries the speed read before it,
    and is set beside the loop timings taken at its speed, not beside their overall median."""
    import torch

    from compilekit import cpuwatch, samespeed, timing

    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    speeds = iter([80.0, 81.0, 45.0, 79.0])
    monkeypatch.setattr(cpuwatch, "quick_loop_ns", lambda: next(speeds))
    host = timing.host_loops(lambda: None, (), calls=3, loops=4)
    assert [ns for _, ns in host["loops"]] == [80.0, 81.0, 45.0, 79.0]
    assert host["calls"] == 3 and host["samples"] == 4 and host["median_ms"] >= 0
    # a user's loop mostly at the fast speed (0.060 ms per call), a few at the slow (0.100)
    user = [[0.060, 45.0 + i % 3] for i in range(40)] + [[0.100, 80.0 + i % 2] for i in range(6)]
    slow_host = [[0.098, 80.0], [0.099, 81.0], [0.097, 200.0]]  # the last: no loop at its speed
    pairs = samespeed.at_same_speed(user, slow_host)
    assert pairs == [(0.098, 0.100), (0.099, 0.100)], pairs
    # against the user's loop overall (0.060), this host cost would read 1.6x the loop's time
    assert samespeed.at_same_speed(user[:40] + user[40:42], slow_host) == []  # 2 < 3 matches


def _toolkit_remeasures(monkeypatch, **fields):
    """runner.launch as verify.paired calls it: a measured result with no host figures; each of
    `fields` a callable, called once per launch for that field's value."""
    from types import SimpleNamespace

    from compilekit import runner

    monkeypatch.setattr(
        runner,
        "launch",
        lambda cell, out, root: SimpleNamespace(
            measured=True, status="ok", host_ms_per_call=None, cpu_use=None,
            **{name: value() for name, value in fields.items()},
        ),
    )  # fmt: skip


def test_paired_verify_decides_where_the_host_drifts(run_cell, cache_root, monkeypatch):
    """Each pair (the toolkit's re-measure, then a bare re-time) shares the host's state of the
    moment: pairs that agree are 'within' even when the host's speed moved 2x between them (the
    bare re-times alone: inconclusive); a toolkit 50% slow in every pair is 'outside'; pairs
    that scatter are 'inconclusive' even where their median lands within, and so are two pairs,
    however alike: each process brings its own luck (11-15% on the H200)."""

    from compilekit import verify

    result = run_cell("naive", "eager")
    for host, toolkit_over_bare, expected in (
        ([1.0, 2.0, 1.3], [1.0, 1.01, 0.99], "within"),
        ([1.0, 2.0, 1.3], [1.5, 1.48, 1.52], "outside"),
        ([1.0, 2.0, 1.3, 1.1], [1.0, 1.5, 0.7, 1.2], "inconclusive"),
        # the median is within 5%, but only one pair is (the H200, 2026-12-01)
        ([1.0, 2.0, 1.3], [1.16, 0.741, 0.986], "inconclusive"),
        # two pairs alike and 7% fast (the H200 read 0.940 and 0.943 at sdpa 1x4x128x64, while
        # bare processes alone read 11-15% apart there): too few to say
        ([1.0, 2.0], [0.930, 0.932], "inconclusive"),
        # a third that reads 1.0: its 90% interval, 0.906-1.019, reaches across 0.95
        ([1.0, 2.0, 1.3], [0.940, 0.943, 1.0], "inconclusive"),
    ):
        bares, measures = iter(host), iter(h * r for h, r in zip(host, toolkit_over_bare))
        monkeypatch.setattr(
            verify, "_bare_once", lambda c, env, calls, repeats: {"median_ms": next(bares)}
        )
        _toolkit_remeasures(monkeypatch, compiled_ms=lambda: next(measures))
        line, verdict = verify.paired(result.run_dir, len(host), 0.05, cache_root)
        assert verdict == expected, line
        assert "host per call" not in line  # CPU: no host figure on either side
    assert "0.906-1.019: INCONCLUSIVE" in line and "about 29 pairs would decide" in line, line


def test_paired_verify_shows_whether_the_toolkit_pays_more_host_time(
    run_cell, cache_root, monkeypatch
):
    from types import SimpleNamespace

    from compilekit import runner, verify

    result = run_cell("naive", "eager")
    bares = iter([(0.040, [50.0, 52.0]), (0.050, [100.0, 102.0])])

    def bare(c, env, calls, repeats):
        host, speed = next(bares)
        return {"median_ms": 1.0, "host_ms": host, "loop_ns": speed}

    monkeypatch.setattr(verify, "_bare_once", bare)
    monkeypatch.setattr(
        runner,
        "launch",
        lambda cell, out, root: SimpleNamespace(
            measured=True,
            status="ok",
            compiled_ms=1.0,
            host_ms_per_call=0.050,
            cpu_use={"loop_ns": [51.0, 51.0]},
        ),
    )
    line, _ = verify.paired(result.run_dir, 2, 0.05, cache_root)
    # the second pair's bare process ran on a CPU twice as slow: its host ratio says why
    assert line.endswith(
        "; host per call, toolkit over bare: 1.250, 1.000"
        "; CPU ns per Python loop step, toolkit over bare: 1.00, 0.50"
    ), line


def test_a_check_keeps_its_raw_figures_beside_the_run(run_cell, tmp_path, monkeypatch):
    """Each verify and --paired appends what it measured to the run's verify.json (every bare
    process's figures, each re-measure's), so a verdict can be re-read, not only its line; a
    run directory that cannot be written keeps the verdict and says the figures were lost."""
    import json
    import shutil
    from types import SimpleNamespace

    from compilekit import runner, store, verify

    run = tmp_path / "run"
    shutil.copytree(run_cell("naive", "eager").run_dir, run)
    (run / "verify.json").unlink(missing_ok=True)  # other tests' checks of the shared run
    bares = iter([{"median_ms": m} for m in (1.00, 1.01, 0.99, 1.02)])
    monkeypatch.setattr(verify, "_bare_once", lambda c, env, calls, repeats: next(bares))
    line, verdict = verify.verify(str(run), 100.0, repeat=3)
    remeasure = SimpleNamespace(
        measured=True, status="ok", compiled_ms=1.03, cpu_use=None, host_ms_per_call=None
    )
    monkeypatch.setattr(runner, "launch", lambda cell, out, root: remeasure)
    paired_line, paired_verdict = verify.paired(str(run), 1, 100.0)
    first, second = json.loads((run / "verify.json").read_text())
    assert (first["kind"], first["verdict"], first["line"]) == ("verify", verdict, line)
    assert [b["median_ms"] for b in first["bare_runs"]] == [1.00, 1.01, 0.99]
    assert (second["kind"], second["verdict"], second["line"]) == (
        "paired",
        paired_verdict,
        paired_line,
    )
    assert second["pairs"] == [{
        "toolkit": {"compiled_ms": 1.03, "compiled_loop_ms": None, "host_ms_per_call": None,
                    "loop_timing": None, "cpu_use": None},
        "bare": {"median_ms": 1.02},
    }]  # fmt: skip

    def refuse(path, data):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(store, "write_json", refuse)
    bares = iter([{"median_ms": 1.0}] * 3)
    line, again = verify.verify(str(run), 100.0, repeat=3)
    assert again == verdict and line.endswith("verify.json: Permission denied)"), line


def test_a_paired_check_stopped_midway_keeps_the_pairs_it_finished(
    run_cell, tmp_path, monkeypatch
):
    """A GPU call's deadline can stop a dozen pairs midway: the pairs done are in verify.json
    (verdict "unfinished"), and a check that finishes leaves one entry, its own."""
    import json
    import shutil
    from types import SimpleNamespace

    from compilekit import runner, verify

    run = tmp_path / "run"
    shutil.copytree(run_cell("naive", "eager").run_dir, run)
    (run / "verify.json").unlink(missing_ok=True)
    remeasure = SimpleNamespace(
        measured=True, status="ok", compiled_ms=1.03, cpu_use=None, host_ms_per_call=None
    )
    monkeypatch.setattr(runner, "launch", lambda cell, out, root: remeasure)
    bares = iter([{"median_ms": 1.0}, {"median_ms": 1.0}])

    def bare(c, env, calls, repeats):  # the third bare process never returns: the deadline
        return next(bares)

    monkeypatch.setattr(verify, "_bare_once", bare)
    with pytest.raises(StopIteration):
        verify.paired(str(run), 3, 0.05)
    (stopped,) = json.loads((run / "verify.json").read_text())
    assert stopped["verdict"] == "unfinished" and len(stopped["pairs"]) == 2, stopped
    assert stopped["line"] == "2 of 3 pairs so far; ratios 1.030, 1.030", stopped["line"]
    bares = iter([{"median_ms": 1.0}] * 3)
    line, verdict = verify.paired(str(run), 3, 0.05)
    entries = json.loads((run / "verify.json").read_text())
    assert [e["verdict"] for e in entries] == ["unfinished", verdict], entries
    assert len(entries[1]["pairs"]) == 3 and entries[1]["line"] == line


def test_paired_verify_matches_each_pairs_loops_at_the_same_cpu_speed(
    run_cell, tmp_path, monkeypatch
):
    """For a host-bound run, each pair compares its two processes' loops at the fastest CPU
    speed both ran at: a toolkit process that ran slow for most of its loops reads 1.000
    against its bare partner, at the fast speed where it has enough loops there, else at the
    slow one; a pair whose two processes share no speed gives no ratio, and says so."""
    import shutil

    from compilekit import result as results
    from compilekit import verify

    run = tmp_path / "host_bound"
    shutil.copytree(run_cell("naive", "eager").run_dir, run)
    doctored = results.load(str(run))
    doctored.host_bound, doctored.gpu_busy_share = True, 0.1
    doctored.loop_timing = {"compiled": {"median_ms": 0.08, "p10_ms": 0.08, "calls": 42,
                                         "samples": 40}}  # fmt: skip
    doctored.save(str(run))

    def loops(fast):  # 40 loops, `fast` of them at 45 ns (0.046 ms), the rest at 80 (0.080)
        return [[0.046, 45.0]] * fast + [[0.080, 80.0]] * (40 - fast)

    # toolkit fast loops, bare fast loops: 6 and 35 meet fast, 2 and 35 slow (5 slow bare
    # loops), 10 and 20 fast; 2 and 40 share no speed (the bare process never ran slow)
    measures, bares = iter([6, 2, 10, 2]), iter([35, 35, 20, 40])
    monkeypatch.setattr(
        verify,
        "_bare_once",
        lambda c, env, calls, repeats: {"median_ms": 0.02, "loops": loops(next(bares))},
    )
    _toolkit_remeasures(
        monkeypatch,
        loop_timing=lambda: {"compiled": {"p10_ms": 0.08, "loops": loops(next(measures))}},
    )
    line, verdict = verify.paired(str(run), 4, 0.05)
    assert verdict == "within", line
    assert (
        "ratios 1.000, 1.000, 1.000 (1 pair(s) without 5 loops each at a CPU speed both ran at)"
    ) in line, line
    assert "within 1.15x of the fastest speed at which both processes ran 5 loops" in line, line


def test_paired_verify_of_a_host_bound_cuda_run_sets_each_loop_against_the_next(
    run_cell, tmp_path, monkeypatch
):
    """A host-bound CUDA run's pairs take turns (compilekit/turns.py): each pair's ratio is the
    median over its turns of a toolkit loop over the bare loop right after it, so a host whose
    cost doubles from one turn to the next reads the toolkit's own 1.02; a pair whose toolkit
    loops ran alone (fewer than 5 turns) gives no ratio, and says so."""
    import shutil
    from types import SimpleNamespace

    from compilekit import result as results
    from compilekit import verify

    run = tmp_path / "host_bound_cuda"
    shutil.copytree(run_cell("naive", "eager").run_dir, run)
    doctored = results.load(str(run))
    doctored.device, doctored.host_bound, doctored.gpu_busy_share = "cuda", True, 0.1
    doctored.loop_timing = {"compiled": {"median_ms": 0.08, "p10_ms": 0.08, "calls": 42,
                                         "samples": 40}}  # fmt: skip
    doctored.save(str(run))

    def turns_at(ratio, n=12):  # the host's cost doubles every other turn, in both processes
        return [[lvl * ratio, 45.0, lvl, 45.0] for lvl in [0.05, 0.10] * (n // 2)]

    pairs = iter([turns_at(1.02), turns_at(1.03), turns_at(1.01), turns_at(1.0, 4)])
    asked = []

    def pair(cell, env, calls, out, root, cpu):
        asked.append((calls, cpu))
        again = SimpleNamespace(measured=True, status="ok", host_ms_per_call=None, cpu_use=None)
        again.loop_timing, again.compiled_ms = None, 0.08
        return again, {"median_ms": 0.02, "turns": next(pairs)}

    monkeypatch.setattr(verify, "_pair_by_turns", pair)
    line, verdict = verify.paired(str(run), 4, 0.05)
    assert verdict == "within" and asked == [(42, verify.turns_cpu())] * 4, line
    assert "ratios 1.020, 1.030, 1.010 (1 pair(s) fewer than 5 turns)" in line, line
    assert (
        f"and a bare process taking turns loop by loop, both on CPU {verify.turns_cpu()}" in line
    )


def test_paired_verify_runs_the_toolkit_and_a_bare_process(run_cell, cli):
    result = run_cell("naive", "eager")
    proc = cli("verify", result.run_dir, "--repeat", "1", "--paired", "1", "--tolerance", "100")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (line,) = [ln for ln in proc.stdout.splitlines() if "paired" in ln]
    # one pair decides nothing, at any tolerance (the plain verify, within 10000%, does)
    assert "1 time): ratios" in line and "1 pair(s) read; a verdict takes 3" in line, line


def test_paired_verify_decides_only_where_the_bare_retimes_could_not(monkeypatch, capsys):
    from argparse import Namespace

    from compilekit import cli, verify

    monkeypatch.setattr(verify, "paired", lambda run, n, tol: ("paired line", "within"))
    for plain, pairs, code in (
        ("inconclusive", 3, 0),  # the pairs decide
        ("inconclusive", 0, 1),  # nobody decided: not a pass
        ("outside", 3, 1),  # the bare re-times were clear: the pairs do not overrule them
    ):
        monkeypatch.setattr(verify, "verify", lambda run, tol, repeat: ("line", plain))
        args = Namespace(run_dirs=["run"], tolerance=0.05, repeat=3, paired=pairs)
        assert cli.cmd_verify(args) == code, (plain, pairs)
    assert "paired line" in capsys.readouterr().out


def _timing(median, low, p90):
    return {"median_ms": median, "p10_ms": low, "p90_ms": p90, "min_ms": low, "samples": 100}


class _QuietWatch:
    """cpuwatch.watch on a CPU that nothing disturbed: the tests' own machine may change speed
    meanwhile (this VM's did, 49 -> 83 ns per loop step), which would add an attempt."""

    def __enter__(self):
        self.use = None
        return self

    def __exit__(self, *exc):
        return False


def _time_with(monkeypatch, benches, watch=_QuietWatch):
    """Run cell._time with timing.bench answering `benches`, given as (eager, compiled) per
    attempt (cell._timed_calls asks for compiled first), and `watch` as cpuwatch.watch."""
    import os
    import types

    from compilekit import cell, cpuwatch, timing
    from compilekit.result import CellResult

    monkeypatch.setattr(cpuwatch, "watch", watch)
    answers = iter([b for i in range(0, len(benches), 2) for b in (benches[i + 1], benches[i])])
    monkeypatch.setattr(timing, "bench", lambda fn, args, device: next(answers))
    monkeypatch.setattr(cell, "RETIME_PAUSE_S", 0.0)
    monkeypatch.setattr(os, "getloadavg", lambda: (0.0, 0.0, 0.0), raising=False)
    spec = types.SimpleNamespace(device="cpu", mode="default", shape=None)
    variant = types.SimpleNamespace(attention=None, flops=None)
    result = CellResult(
        variant="v", mode="default", shape="1x1x8x8", dtype="float32", device="cpu"
    )
    cell._time(spec, variant, None, (), result)
    return result


def test_a_disturbed_timing_is_taken_again_and_the_quietest_attempt_kept(monkeypatch, tmp_path):
    quiet, disturbed = _timing(1.0, 0.98, 1.05), _timing(1.6, 0.99, 2.4)
    result = _time_with(monkeypatch, [quiet, disturbed, quiet, _timing(1.01, 0.99, 1.04)])
    assert result.compiled_ms == 1.01 and not result.noisy and result.noise_note is None
    assert [a["compiled_ms"] for a in result.timing_attempts] == [1.6, 1.01]
    assert result.timing_attempts[0]["noise"].startswith("p90 is 2.42x")
    # said in the run's notes and, for a sweep, under "Timings that may be disturbed"
    from compilekit import report, sweepreport

    line = "re-timed: 2 attempts, compiled medians 1.6, 1.01 ms; kept the quietest"
    assert line in report.cell_notes(result)
    result.status, result.label = "ok", "v__default__1x1x8x8__float32__cpu"
    cell_dir = tmp_path / result.label
    cell_dir.mkdir()
    result.save(str(cell_dir))
    sweepreport.report(str(tmp_path))
    disturbed = (tmp_path / "REPORT.md").read_text().split("## Timings that may be disturbed")[1]
    assert f"`v` / `default` / 1x1x8x8: {line}" in disturbed


def test_a_timing_disturbed_every_time_stays_noisy_with_its_least_spread_attempt(monkeypatch):
    quiet = _timing(1.0, 0.98, 1.05)
    tries = [_timing(1.9, 1.0, 3.0), _timing(1.5, 1.0, 1.8), _timing(1.7, 1.0, 2.2)]
    result = _time_with(monkeypatch, [b for t in tries for b in (quiet, t)])
    assert result.compiled_ms == 1.5 and result.noisy and "1.80x" in result.noise_note
    assert len(result.timing_attempts) == 3


def test_a_timing_beside_busy_processes_is_taken_again_and_says_what_ran(monkeypatch):
    """Tight samples are not enough: the timed phase is meant to have the CPU to itself, so an
    attempt while other processes kept cores busy is re-timed, and a clean one is kept even
    over a busy one with a smaller spread."""
    from compilekit import cpuwatch

    uses = iter(
        [
            cpuwatch.CpuUse(3.0, 2.5, 0.0, [("python3 -m compilekit.cell cold", 2.4)]),
            cpuwatch.CpuUse(3.0, 0.1, 0.0, []),
        ]
    )

    class Watch:
        def __enter__(self):
            self.use = None
            return self

        def __exit__(self, *exc):
            self.use = next(uses)

    import os

    monkeypatch.setattr(os, "cpu_count", lambda: 2)  # 2.5 other cores of 2: busy
    quiet = _timing(1.0, 0.99, 1.0)
    result = _time_with(
        monkeypatch, [quiet, _timing(1.3, 1.29, 1.3), quiet, _timing(1.0, 0.98, 1.04)], Watch
    )
    assert result.compiled_ms == 1.0 and not result.noisy
    busy = result.timing_attempts[0]
    assert "other processes used 2.5 cores (python3 -m compilekit.cell cold 2.4)" in busy["noise"]
    assert busy["cpu_use"]["others_cores"] == 2.5
    assert result.cpu_use["others_cores"] == 0.1


def test_the_timed_calls_follow_the_bare_childs_order(monkeypatch):
    """The compiled callable is timed first, as `compilekit verify`'s bare child times it
    (do_bench, a user's loop, the host's cost), then eager, the comparison; an eager cell
    times its one callable once."""
    import types

    from compilekit import cell, timing

    calls = []

    def record(what, answer):
        return lambda fn, *a, **k: calls.append((what, fn)) or answer

    monkeypatch.setattr(timing, "bench", record("do_bench", _timing(1.0, 0.9, 1.1)))
    monkeypatch.setattr(timing, "loop_timing", record("loop", _timing(1.2, 1.1, 1.3)))
    monkeypatch.setattr(timing, "host_loops", record("host", {"median_ms": 0.05}))
    variant = types.SimpleNamespace(attention="eager")
    spec = types.SimpleNamespace(device="cuda", mode="default")
    eager, steady, host, loops = cell._timed_calls(spec, variant, "compiled", (), True)
    assert calls == [
        ("do_bench", "compiled"), ("loop", "compiled"), ("host", "compiled"),
        ("do_bench", "eager"), ("loop", "eager"),
    ]  # fmt: skip
    assert host == 0.05 and set(loops) == {"compiled", "eager", "host"} and eager and steady
    calls.clear()
    spec.mode = "eager"
    eager, steady, _, loops = cell._timed_calls(spec, variant, "eager", (), True)
    assert calls == [("do_bench", "eager"), ("loop", "eager"), ("host", "eager")]
    assert eager is steady and loops["eager"] is loops["compiled"]


def test_a_quiet_timing_is_taken_once(monkeypatch):
    result = _time_with(monkeypatch, [_timing(1.0, 0.98, 1.05), _timing(0.5, 0.49, 0.52)])
    assert result.compiled_ms == 0.5 and result.timing_attempts is None and not result.noisy


def test_a_host_bound_note_compares_eager_and_compiled_in_a_loop():
    """Compiled sdpa at 1x4x128x64 on the H200: do_bench reads about 2x eager, a loop 2.7x;
    GPU busy is the device time over the loop's time per call, not over do_bench's figure."""
    from compilekit.cell import busy_share
    from compilekit.report import cell_notes
    from compilekit.result import CellResult

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
    assert "the host spends 0.046 ms issuing a call: launches" in note, note  # speed unknown
    result.cpu_use = {"loop_ns": [49.2, 53.8]}  # the speed the host figure was read at
    (note,) = [n for n in cell_notes(result) if n.startswith("host-bound")]
    assert "0.046 ms issuing a call (the CPU at 49-54 ns per probe step): launches" in note
    assert busy_share(0.009, 0.0095) == (0.009 / 0.0095, False)
    # host loops at the slow speed (0.075 ms), the loop mostly at the fast one (0.048): the note
    # sets the host's cost beside the loop's at the host loops' speed, not beside its median
    result.loop_timing["compiled"]["loops"] = [[0.048, 45.0]] * 30 + [[0.080, 80.0]] * 5
    result.loop_timing["host"] = {"loops": [[0.075, 80.0], [0.076, 81.0], [0.074, 79.0]]}
    (note,) = [n for n in cell_notes(result) if n.startswith("host-bound")]
    assert (
        "(the CPU at 49-54 ns per probe step); at one CPU speed, 0.075 ms issuing a call against "
        "0.080 ms per call in the loop: launches"
    ) in note, note


def test_a_host_bound_speedup_compares_loops_at_the_same_cpu_speed():
    """Eager's loops mostly at the slow CPU speed (80 ns per probe step), compiled's mostly at
    the fast one (45): taken as they come they read a 1.7x speedup that is the CPU's. Over the
    loops both ran at the fast speed they read 1.00x, and the note says which loops those are;
    loops that carry no speed keep the plain figures."""
    from compilekit import sweepreport
    from compilekit.report import host_bound_text
    from compilekit.result import CellResult

    def timing(fast, slow, fast_ms):  # loops at 45 ns cost fast_ms, at 80 ns 1.74x as much
        loops = [[fast_ms, 45.0]] * fast + [[fast_ms * 1.74, 80.0]] * slow
        ms = sorted(m for m, _ in loops)
        return {"median_ms": ms[len(ms) // 2], "p10_ms": ms[len(ms) // 10],
                "p90_ms": ms[9 * len(ms) // 10], "calls": 40, "loops": loops}  # fmt: skip

    result = CellResult(
        variant="sdpa", mode="default", shape="1x4x128x64", dtype="bfloat16", device="cuda",
        status="ok", eager_ms=0.0088, compiled_ms=0.017, speedup=0.5, host_bound=True,
        gpu_busy_share=0.2, profiled_forward_device_ms=0.009, host_ms_per_call=0.046,
        loop_timing={"eager": timing(10, 30, 0.046), "compiled": timing(30, 10, 0.046)},
    )  # fmt: skip
    result.eager_loop_ms = result.loop_timing["eager"]["median_ms"]
    result.compiled_loop_ms = result.loop_timing["compiled"]["median_ms"]
    assert result.eager_loop_ms / result.compiled_loop_ms == pytest.approx(1.74)
    assert sweepreport.speedup_text(result) == "1.00 loop"
    assert not sweepreport.saves_time(result)
    note = host_bound_text(result)
    assert (
        "In a loop at the same CPU speed (a probe at most 52 ns per step: 10 and 30 loops), "
        "eager 0.046 vs compiled 0.046 ms per call (1.00x)"
    ) in note, note
    for side in result.loop_timing.values():
        del side["loops"]
    assert sweepreport.speedup_text(result) == "1.74 loop"


def test_a_host_bound_cells_worth_comes_from_a_loop():
    """do_bench says naive reduce-overhead beats eager at a tiny shape (its L2 flush hides host
    time); a loop, which pays the host, says it does not: the table, the cell summary and the
    sweep page's colour follow the loop, for a host-bound cell only."""
    import dataclasses

    from compilekit import pages, sweepreport
    from compilekit.report import cell_summary
    from compilekit.result import CellResult

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
    assert sweepreport.break_even_calls(20.0, result) is None
    assert sweepreport.speedup_text(result) == "0.83 loop"
    assert "speedup 0.83x in a loop (host-bound; do_bench's 1.60x" in cell_summary(result)
    assert pages._speed_class(result) == "slow1"
    device_bound = dataclasses.replace(result, host_bound=False, gpu_busy_share=0.9)
    assert sweepreport.speedup_text(device_bound) == "1.60"
    assert sweepreport.break_even_calls(20.0, device_bound) == 1_333_334
    assert pages._speed_class(device_bound) == "fast2"


def test_a_compiled_cell_whose_eager_runs_out_of_memory_is_checked_and_timed_compiled(
    run_cell, tmp_path_factory
):
    """flex's eager path at 4x16x16384 needs more memory than an H200 has, its compiled call
    does not: such a cell is checked against the reference and timed compiled alone, with no
    eager figure, no speedup and a note that says why; the eager cell itself still fails."""
    from compilekit import report, sweepreport

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
    assert result.compile_cold_s > 0  # the cold and capture processes went on past eager too
    summary = report.cell_summary(result)
    assert f"latency     compiled {result.compiled_ms:.3f} ms; eager could not run" in summary
    row = dict(zip(sweepreport.headers([result]), sweepreport.rows([result], None)[0]))
    assert (row["eager_ms"], row["speedup"], row["break_even_cold"]) == ("-", "-", "-")
    assert result.eager_note in report.cell_notes(result)
    # on a GPU such a cell may be host-bound: a compiled loop, and no eager one beside it
    result.host_bound, result.gpu_busy_share, result.host_ms_per_call = True, 0.3, 0.05
    result.profiled_forward_device_ms, result.compiled_loop_ms = 0.02, 0.06
    result.loop_timing = {"compiled": {"median_ms": 0.06, "calls": 40}}
    row = dict(zip(sweepreport.headers([result]), sweepreport.rows([result], None)[0]))
    assert (row["speedup"], row["break_even_warm"]) == ("-", "-")
    assert "host-bound: GPU busy 30% of each call in a loop" in "\n".join(
        report.cell_notes(result)
    )
    assert "eager could not run" in report.cell_summary(result)
    eager = run_cell(f"{path}:attention", "eager")
    assert eager.status == "failed" and "out of memory allocating 64.00 GiB" in eager.reason
