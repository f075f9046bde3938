"""Two measurements of the same cells, compared: `compilekit compare BASE NEW`.

BASE and NEW are each a run directory, a sweep directory or a published folder. Cells pair by
label (variant, mode, shape, dtype, device, options, grad mode); a cell on one side only is
listed, never dropped.

A pair's time ratio (NEW over BASE, above 1: slower) comes with a 95% interval: each median's
standard error from its cell's own samples (a median's, from the p10-p90 spread and the sample
count), and in quadrature a floor for what separates two processes of the same code on one
machine (NOISE_FLOOR: the samples of one process do not see a clock, a placement or a CPU
speed that changes between processes). The verdict:
- slower / faster: the interval lies above / below 1;
- same: the interval lies within the band (1 ± band, 10% unless a gate says less);
- inconclusive: neither.
A side that flagged its own timing as disturbed (noisy) widens the floor by one more floor.
A host-bound cell (CUDA: the host's cost per call above the GPU's) is compared on the user's
loop, the figure it is bound by, and says so; gates pass it by unless asked (check.py).

Beside the time: cold and warm compile seconds, kernels per forward, graph breaks,
recompiles, CUDA graphs skipped, inputs a CUDA-graph replay copies, and peak memory.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re

from compilekit.model import kernelfile
from compilekit.model import result as results
from compilekit.model.errors import UserError
from compilekit.model.store import CorruptFile, kept

# The 95% half-width that separates two fresh processes of the same cell on one machine,
# relative (--noise-floor sets another: measure a runner's own by comparing two runs of
# unchanged code). CUDA: `compilekit verify`'s bare re-timings of device-bound cells land
# within 1% of the cell (docs/fidelity.md). CPU: on a shared 2-core VM, checks of unchanged
# code read cells 1.6-2.5x apart while other work ran beside them (docs/ci.md): e^1.0 = 2.7x.
NOISE_FLOOR = {"cuda": 0.02, "cpu": 1.0}
BAND = 0.10  # "same" when the interval lies within 1 ± BAND (asv's default factor, 1.1)
Z95 = 1.96


@dataclasses.dataclass
class Pair:
    """One cell on both sides, or on one: its figures and verdict."""

    label: str
    base: object = None  # CellResult
    new: object = None
    ratio: float | None = None
    low: float | None = None
    high: float | None = None
    verdict: str = ""  # faster, slower, same, inconclusive; or why there is no ratio
    why: str = ""  # what the verdict rests on: noisy, host-bound (user's loop), a status
    host_bound: bool = False
    base_ms: float | None = None  # the times the ratio divides: both medians or both loops
    new_ms: float | None = None
    kernels_new: list = dataclasses.field(default_factory=list)  # kernels NEW has, BASE not
    kernels_gone: list = dataclasses.field(default_factory=list)

    def figures(self, side) -> dict:
        """The compile contract and cost beside the time, for one side's result."""
        return contract(self.base if side == "base" else self.new)


def load_side(path: str, log=None) -> dict:
    """{label: CellResult} of a run directory, a sweep or a published folder."""
    from compilekit.report.sweepreport import load_results

    if not os.path.isdir(path):
        raise UserError(f"{path!r} is not a directory: give a run, a sweep or a published folder")
    if os.path.isfile(kept(os.path.join(path, "result.json"))):
        found = [results.read_run(path)]
    else:
        found = load_results(path, log)
    return {r.label or os.path.basename(r.run_dir): r for r in found}


def timing(result, loop: bool | None = None) -> dict | None:
    """The cell's own time: {"ms", "rel_se" (the median's standard error, relative), "what"};
    None where the cell has none (not measured, or an old record). loop: the user's loop
    where the cell timed one (default: where it is host-bound), else the median."""
    if result.decode:  # a decode: its own loop's per-token time
        kind = "eager" if result.mode == "eager" else "compiled"
        own = ((result.decode.get("paths") or {}).get("loop") or {}).get(kind) or {}
        if not own.get("median_ms"):
            return None
        med, n = own["median_ms"], own.get("tokens_timed")
        p90 = own.get("p90_ms") or med  # a decode keeps no p10: its spread taken as symmetric
        return {"ms": med, "rel_se": _se(med, med - (p90 - med), p90, n), "what": "per token"}
    loop = result.host_bound if loop is None else loop
    if loop and (result.loop_timing or {}).get("compiled"):
        t = result.loop_timing["compiled"]
        return {"ms": t["median_ms"], "rel_se": _se(**_q(t)), "what": "user's loop"}
    t = result.compiled_timing
    if not t or not t.get("median_ms"):
        return None
    return {"ms": t["median_ms"], "rel_se": _se(**_q(t)), "what": "median"}


def _q(t: dict) -> dict:
    return {"med": t["median_ms"], "p10": t.get("p10_ms"), "p90": t.get("p90_ms"),
            "n": t.get("samples")}  # fmt: skip


def _se(med, p10, p90, n) -> float:
    """A median's relative standard error from its samples' p10-p90 spread: sigma as the
    spread over 2 x 1.2816 (a normal's), and the median's error 1.2533 sigma / sqrt(n)."""
    if not med or p10 is None or p90 is None or not n:
        return 0.0
    sigma = max(p90 - p10, 0.0) / (2 * 1.2816)
    return 1.2533 * sigma / math.sqrt(n) / med


def judge(base, new, band: float = BAND, floor: float | None = None) -> Pair:
    """The pair's ratio, interval and verdict (module docstring); floor: the between-process
    half-width (default NOISE_FLOOR's for the cell's device)."""
    pair = Pair(label=new.label or base.label, base=base, new=new)
    if not base.ok or not new.ok:  # no time to compare: the statuses say what changed
        same = base.status == new.status
        pair.verdict = new.status if same else "status"
        pair.why = "" if same else f"{base.status} -> {new.status}"
        return pair
    # one measure on both sides: the user's loop where either side is host-bound (a host
    # loaded by other work can make a cell host-bound in one run and not in the next)
    pair.host_bound = bool(base.host_bound or new.host_bound)
    loop = pair.host_bound and all((r.loop_timing or {}).get("compiled") for r in (base, new))
    tb, tn = timing(base, loop), timing(new, loop)
    if not tb or not tn:
        pair.verdict, pair.why = "no time", "a side has no timing"
        return pair
    pair.base_ms, pair.new_ms = tb["ms"], tn["ms"]
    pair.ratio = tn["ms"] / tb["ms"]
    if floor is None:
        floor = NOISE_FLOOR.get(new.device, NOISE_FLOOR["cpu"])
    noisy = [side for side, r in (("BASE", base), ("NEW", new)) if r.noisy]
    floor *= 1 + len(noisy)  # a side whose own timing was disturbed: its process's noise again
    half = math.hypot(Z95 * math.hypot(tb["rel_se"], tn["rel_se"]), floor)
    pair.low, pair.high = pair.ratio * math.exp(-half), pair.ratio * math.exp(half)
    why = [tn["what"]] if tn["what"] != "median" else []
    why += ["noisy " + " and ".join(noisy)] if noisy else []
    if pair.low > 1:
        pair.verdict = "slower"
    elif pair.high < 1:
        pair.verdict = "faster"
    elif pair.low >= 1 / (1 + band) and pair.high <= 1 + band:
        pair.verdict = "same"
    else:
        pair.verdict = "inconclusive"
    pair.why = ", ".join(why)
    return pair


def contract(result) -> dict:
    """A result's compile contract and costs: graph breaks, recompiles, CUDA graphs skipped,
    inputs a replay copies, kernels per forward, cold and warm compile s, peak MB."""
    if result is None:
        return {}
    dynamo = result.dynamo or {}
    graphs = result.cudagraphs or {}
    return {
        "graph_breaks": sum((dynamo.get("graph_breaks") or {}).values()) if dynamo else None,
        "recompiles": len(dynamo.get("recompiles") or []) if dynamo else None,
        "cudagraph_skips": (
            int(bool(graphs.get("requested")) and not graphs.get("applied")) if graphs else None
        ),
        "input_copies": (result.replay or {}).get("inputs_recorded_non_static"),
        "kernels": result.kernels_per_forward,
        "compile_cold_s": result.compile_cold_s,
        "compile_warm_s": result.compile_warm_s,
        "peak_mb": result.peak_memory_mb,
    }


def kernel_names(result) -> set | None:
    """The kernels of a cell's kernel map, without Inductor's per-graph counters (so the same
    fused kernel matches across runs); None where the cell has no map."""
    if not result.run_dir:
        return None
    path = kept(os.path.join(result.run_dir, "kernels.json"))
    if not os.path.isfile(path):
        return None
    try:
        kmap = kernelfile.load(path)
    except CorruptFile:
        return None
    return {_kernel_name(r["name"]) for r in kmap["kernels"]}


def _kernel_name(name: str) -> str:
    return re.sub(r"_\d+$", "", name) if name.startswith(("triton_", "cpp_")) else name


def compare(
    base_path: str, new_path: str, band: float = BAND, floor: float | None = None, log=None
) -> dict:
    """{"pairs": [Pair, ...] (cells on both sides, BASE's order), "only_base", "only_new"
    (labels), "notes" (what the reader must know: different machines)}."""
    base, new = load_side(base_path, log), load_side(new_path, log)
    pairs = []
    for label in sorted(set(base) & set(new)):
        pair = judge(base[label], new[label], band, floor)
        kb, kn = kernel_names(base[label]), kernel_names(new[label])
        if kb is not None and kn is not None:
            pair.kernels_new, pair.kernels_gone = sorted(kn - kb), sorted(kb - kn)
        pairs.append(pair)
    return {
        "pairs": pairs,
        "only_base": sorted(set(base) - set(new)),
        "only_new": sorted(set(new) - set(base)),
        "notes": _machine_notes(base.values(), new.values()),
    }


def _machine_notes(base, new) -> list[str]:
    """A line when the two sides ran on different machines: their times then compare those."""

    def machines(side):
        return {(r.env or {}).get("gpu") or "the CPU" for r in side if r.env}

    mb, mn = machines(base), machines(new)
    if mb and mn and mb != mn:
        return [
            f"BASE ran on {', '.join(sorted(mb))} and NEW on {', '.join(sorted(mn))}: their "
            "times compare the machines too; the compile-contract figures do not depend on it"
        ]
    return []
