"""How far apart are fresh bare processes of one host-bound cell at the same CPU speed, and what
brings them together: pinning them to one core, or fixing the process's layout (GPU)?

`compilekit verify` judges a host-bound run by its loops at the CPU's fast speed against bare
processes' loops at that speed (compilekit/samespeed.py). On the H200 (2026-12-01, issue 8's
fidelity cells at 1x4x128x64) three bare processes still read 0.0455, 0.0514 and 0.0555 ms per
call with the same probe reading (44-47 ns per step): a spread the probe does not explain, and
wider than the 5% the check is asked to resolve. If it came from the core a process runs on
(the cores' launch costs differed 6.3-11.5 µs at like Python speeds,
experiments/results/h200/host_bound_timing/cpu_speed_2026-12-01.txt), processes pinned to one
core would agree. They did not (11-15% apart, 2026-12-01e, `--placements core:0,core:8,free`;
then spelled `--cores 0,8`). Within a process, loops at one speed agree to a few percent: the
next suspect is the process's own layout, its hash seed and its address-space randomization,
which move a host-bound loop's cache and branch behaviour from one process to the next.

This runs the bare child of `compilekit verify` (python -m compilekit.verify) `--procs` times
for each placement, the placements interleaved so that the host's drift falls on all of them
alike. A placement is `free` (as a user starts it) or a `+`-joined set of: `core:N` (pinned with
taskset), `seed` (PYTHONHASHSEED=0), `noaslr` (setarch -R: no address-space randomization).
Per process it prints the median ms per call of its loops in each 4 ns band of the probe, and
per placement the spread of the processes' medians in the band most of them share.

Usage (GPU): python3 experiments/bare_spread.py RUN_DIR [--procs 4] [--placements free,seed+noaslr]
  (RUN_DIR from `compilekit run`: the bare child warm-compiles from its cell's cache)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
from collections import Counter

BAND_NS = 4


def bands(loops: list) -> dict[int, float]:
    """{band's lower ns: median ms per call} over the bands holding at least 3 loops."""
    by_band: dict[int, list[float]] = {}
    for ms, ns in loops:
        by_band.setdefault(int(ns // BAND_NS) * BAND_NS, []).append(ms)
    return {b: statistics.median(v) for b, v in sorted(by_band.items()) if len(v) >= 3}


def placed(placement: str) -> tuple[list[str], dict]:
    """The command prefix and environment variables that start a process in `placement` (see
    the docstring)."""
    prefix, env = [], {}
    for part in placement.split("+"):
        if part.startswith("core:"):
            prefix += ["taskset", "-c", part[5:]]
        elif part == "seed":
            env["PYTHONHASHSEED"] = "0"
        elif part == "noaslr":
            prefix += ["setarch", os.uname().machine, "-R"]
        elif part != "free":
            raise SystemExit(f"unknown placement {part!r}: free, core:N, seed or noaslr")
    return prefix, env


def bare_process(run_dir: str, placement: str) -> dict:
    """One bare child's figures (`compilekit verify`'s), started in `placement`."""
    from compilekit import runner, verify

    result, cell = verify._measured_cell(run_dir)
    figure = verify._figure(result)
    prefix, env = placed(placement)
    env = {**verify._bare_env(cell, runner.default_cache_root()), **env}
    return verify._bare_once(cell, env, figure.calls or 50, figure.repeats or 45, tuple(prefix))


def spread(per_process: list[dict[int, float]]) -> str:
    """The spread of the processes' medians in the band most of them share."""
    counts = Counter(b for process in per_process for b in process)
    if not counts:
        return "no band with 3 loops"
    band, n = max(counts.items(), key=lambda kv: (kv[1], -kv[0]))
    values = [process[band] for process in per_process if band in process]
    return (
        f"band {band}-{band + BAND_NS} ns: {n} of {len(per_process)} processes, "
        f"{min(values):.4f}-{max(values):.4f} ms ({max(values) / min(values) - 1:.1%} apart)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir")
    parser.add_argument("--procs", type=int, default=4)
    parser.add_argument("--placements", default="free,seed+noaslr")
    args = parser.parse_args()
    placements = args.placements.split(",")
    for placement in placements:  # a typo ends here, not after minutes of processes
        placed(placement)
    seen: dict[str, list] = {p: [] for p in placements}
    for i in range(args.procs):
        for placement in placements:
            bare = bare_process(args.run_dir, placement)
            per_band = bands(bare["loops"])
            seen[placement].append(per_band)
            text = "  ".join(f"{b}:{ms:.4f}" for b, ms in per_band.items())
            print(f"round {i} {placement:12s} {text}")
            print("  raw " + json.dumps(bare["loops"]), flush=True)
    for placement in placements:
        print(f"{placement:12s} {spread(seen[placement])}")
    print(f"{'all':12s} {spread([b for v in seen.values() for b in v])}")


if __name__ == "__main__":
    main()
