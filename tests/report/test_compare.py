"""`compilekit compare` and `compilekit check`'s gates on hand-made cells: the ratio's interval
and verdict, each gate, cells on one side only, the formats, and bad input in one line."""

import json
import os

import pytest

from compilekit import cli
from compilekit.model.result import CellResult
from compilekit.report import compare, gates

LABEL = "naive__default__8x16x1024x64__bfloat16__cuda"


def kmap(names):
    rec = lambda n: {  # noqa: E731
        "name": n, "kind": "triton", "aten_ops": [], "source_lines": [], "source_via": "none",
        "calls_per_forward": 1.0, "device_ms": 0.1,
    }  # fmt: skip
    return {"forward_device_ms": 0.1 * len(names), "kernels_per_forward": float(len(names)),
            "kernels": [rec(n) for n in names], "by_source_line": []}  # fmt: skip


def cell(folder, label=LABEL, ms=1.0, spread=0.01, samples=400, kernels=("triton_poi_a_0",),
         breaks=0, recompiles=0, peak=100.0, **fields):  # fmt: skip
    """A measured cell under folder/label: a median of ms with p10/p90 at ms -/+ spread."""
    variant, mode, shape, dtype, device = label.split("__")[:5]
    defaults = dict(
        status="ok", compiled_ms=ms, eager_ms=2 * ms, peak_memory_mb=peak,
        compiled_timing={"median_ms": ms, "p10_ms": ms - spread, "p90_ms": ms + spread,
                         "min_ms": ms - spread, "samples": samples},
        dynamo={"graph_breaks": {"a reason": breaks} if breaks else {}, "unique_graphs": 1,
                "recompiles": ["guard failed"] * recompiles, "inductor": {}},
        cudagraphs={"requested": False, "applied": False}, kernels_per_forward=len(kernels),
        env={"gpu": "NVIDIA H200"} if device == "cuda" else {"host": "vm"},
    )  # fmt: skip
    result = CellResult(variant, mode, shape, dtype, device, label=label, **{**defaults, **fields})
    run_dir = os.path.join(folder, label)
    os.makedirs(run_dir)
    result.save(run_dir)
    with open(os.path.join(run_dir, "kernels.json"), "w") as f:
        json.dump(kmap(kernels), f)
    return run_dir


def one(tmp_path, base: dict, new: dict, **kw):
    cell(tmp_path / "base", **base)
    cell(tmp_path / "new", **new)
    return compare.compare(str(tmp_path / "base"), str(tmp_path / "new"), **kw)


def test_verdicts_follow_the_interval(tmp_path):
    """Slower and faster when the interval clears 1; same within the band; a noisy side makes
    it inconclusive whatever the ratio; a host-bound cell is judged on the user's loop."""
    slow = one(tmp_path / "a", {}, {"ms": 1.10})["pairs"][0]
    assert slow.verdict == "slower" and slow.low > 1 and slow.ratio == pytest.approx(1.10)
    assert one(tmp_path / "b", {}, {"ms": 0.90})["pairs"][0].verdict == "faster"
    assert one(tmp_path / "c", {}, {"ms": 1.005})["pairs"][0].verdict == "same"
    # a noisy side doubles the floor: 3% slower is then not clear (within the band), 50% is
    noisy = one(tmp_path / "d", {}, {"ms": 1.03, "noisy": True})["pairs"][0]
    assert (noisy.verdict, noisy.why) == ("same", "noisy NEW")
    assert one(tmp_path / "g", {}, {"ms": 1.03})["pairs"][0].verdict == "slower"
    assert one(tmp_path / "h", {"noisy": True}, {"ms": 1.5})["pairs"][0].verdict == "slower"
    # few samples, wide spread: the interval straddles 1 and passes the band
    wide = one(tmp_path / "e", {"spread": 0.5, "samples": 5}, {"ms": 1.03})["pairs"][0]
    assert wide.verdict == "inconclusive" and wide.low < 1 < wide.high


def test_a_cell_host_bound_on_one_side_is_judged_on_both_sides_loops(tmp_path):
    """A busy host made BASE host-bound (its loop 3 ms over a 1 ms median), NEW not: both
    sides' loops are divided, never BASE's loop by NEW's median; without a loop on one side,
    both medians."""
    loop = {"compiled": {"median_ms": 3.0, "p10_ms": 2.9, "p90_ms": 3.1, "samples": 50}}
    new_loop = {"compiled": {"median_ms": 1.5, "p10_ms": 1.4, "p90_ms": 1.6, "samples": 50}}
    base = {"host_bound": True, "loop_timing": loop}
    pair = one(tmp_path / "f", base, {"ms": 1.0, "loop_timing": new_loop})["pairs"][0]
    assert pair.host_bound and pair.why == "user's loop" and pair.ratio == pytest.approx(0.5)
    assert (pair.base_ms, pair.new_ms) == (3.0, 1.5)
    medians = one(tmp_path / "g", base, {"ms": 1.0})["pairs"][0]
    assert medians.ratio == pytest.approx(1.0) and medians.verdict == "same"


def test_noise_floor_widens_the_interval(tmp_path):
    """CPU cells carry the CPU's floor: a 20% change on a CPU is inconclusive, on CUDA slower."""
    cpu = LABEL.replace("cuda", "cpu")
    assert one(tmp_path / "a", {"label": cpu}, {"label": cpu, "ms": 1.2})["pairs"][0].verdict == (
        "inconclusive"
    )
    assert one(tmp_path / "b", {}, {"ms": 1.2})["pairs"][0].verdict == "slower"
    narrow = one(tmp_path / "c", {"label": cpu}, {"label": cpu, "ms": 1.2}, floor=0.02)
    assert narrow["pairs"][0].verdict == "slower"


def test_cells_on_one_side_are_listed(tmp_path):
    cell(tmp_path / "base")
    cell(tmp_path / "base", label=LABEL.replace("naive", "sdpa"))
    cell(tmp_path / "new")
    cell(tmp_path / "new", label=LABEL.replace("default", "eager"))
    found = compare.compare(str(tmp_path / "base"), str(tmp_path / "new"))
    assert [p.label for p in found["pairs"]] == [LABEL]
    assert found["only_base"] == [LABEL.replace("naive", "sdpa")]
    assert found["only_new"] == [LABEL.replace("default", "eager")]


def run_gates(tmp_path, new: dict, gate: gates.Gates, base: dict | None = None) -> list:
    return gates.failures(one(tmp_path, base or {}, new), gate)


ALL = gates.Gates(
    max_slowdown=0.05, max_graph_breaks=0, max_recompiles=0, no_new_kernels=True,
    max_peak_memory_growth=0.10,
)  # fmt: skip


def test_unchanged_passes_every_gate(tmp_path):
    assert run_gates(tmp_path, {"ms": 1.003, "peak": 104.0}, ALL) == []


@pytest.mark.parametrize(
    "new, words",
    [
        ({"ms": 1.10}, "beyond --max-slowdown 5%"),
        ({"breaks": 1}, "graph breaks 0 -> 1"),
        ({"recompiles": 2}, "recompiles 0 -> 2"),
        ({"kernels": ("triton_poi_a_3", "triton_red_b_1")}, "1 new kernel(s): triton_red_b"),
        ({"peak": 111.0}, "peak memory 100.0 -> 111.0 MB"),
        ({"status": "wrong", "reason": "max_rel_err 0.5"}, "was ok, now wrong"),
    ],
)
def test_each_gate_fails_its_regression(tmp_path, new, words):
    failed = run_gates(tmp_path, new, ALL)
    assert len(failed) == 1 and words in failed[0], failed


def test_gates_read_growth_not_counts(tmp_path):
    """A break the baseline had already is not a new one; a slowdown within the gate passes;
    a host-bound cell's slowdown passes unless asked; a gate not given is not applied."""
    assert run_gates(tmp_path / "a", {"breaks": 2}, ALL, base={"breaks": 2}) == []
    assert run_gates(tmp_path / "b", {"ms": 1.04}, ALL) == []
    loop = {"compiled": {"median_ms": 1.0, "p10_ms": 0.99, "p90_ms": 1.01, "samples": 400}}
    slow_host = {"ms": 1.5, "host_bound": True,
                 "loop_timing": {"compiled": {**loop["compiled"], "median_ms": 1.5}}}  # fmt: skip
    base_host = {"host_bound": True, "loop_timing": loop}
    assert run_gates(tmp_path / "c", slow_host, ALL, base=base_host) == []
    asked = gates.Gates(max_slowdown=0.05, gate_host_bound=True)
    assert len(run_gates(tmp_path / "d", slow_host, asked, base=base_host)) == 1
    assert run_gates(tmp_path / "e", {"ms": 1.5, "breaks": 3}, gates.Gates()) == []


def test_compare_formats_and_bad_input(tmp_path, capsys):
    cell(tmp_path / "base")
    cell(tmp_path / "new", ms=1.1, breaks=1)
    base, new = str(tmp_path / "base"), str(tmp_path / "new")
    assert cli.main(["compare", base, new, "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    (row,) = data["cells"]
    assert row["verdict"] == "slower" and row["new"]["graph_breaks"] == 1
    assert cli.main(["compare", base, new, "--format", "markdown"]) == 0
    text = capsys.readouterr().out
    assert "| naive__default" in text and "1 slower" in text and "0 -> 1" in text
    # a single run directory on each side
    assert cli.main(["compare", f"{base}/{LABEL}", f"{new}/{LABEL}"]) == 0
    assert "1 cells on both sides: 1 slower" in capsys.readouterr().out
    for argv, words in (
        (["compare", base, str(tmp_path / "nothing")], "is not a directory"),
        (["compare", base, new, "--format", "html"], "--format 'html': choose"),
        (["compare", base, new, "--noise-floor", "lots"], "--noise-floor 'lots'"),
        (["check", "experiments/cpu_small.toml", "--baseline", base, "--max-slowdown=-1%"],
         "--max-slowdown '-1%'"),
        (["check", "experiments/cpu_small.toml", "--baseline", base, "--max-recompiles", "x"],
         "--max-recompiles 'x'"),
        (["check", "experiments/cpu_small.toml", "--baseline", base, "--out", base],
         "is the baseline"),
    ):  # fmt: skip
        assert cli.main(argv) == 2, argv
        err = capsys.readouterr().err
        assert words in err and err.count("\n") == 1, err
