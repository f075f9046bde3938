"""What a sweep writes and says as it starts and ends: sweep.json (the experiment, its
[against] table, each cell's status) and the closing lines."""

from __future__ import annotations

import os

from compilekit.model import result as results
from compilekit.model.experiment import against_json
from compilekit.model.store import write_json


def summed_steps(ordered, step: str) -> float:
    """One step summed over the cells and every process of each (`step`, `cold.step`, ...):
    gpu_alone_s, the seconds they held their GPU alone (timed calls, profiles, Inductor's
    benchmarks: on one GPU no schedule of these cells finishes in less), or gpu_alone_turns."""
    return round(
        sum(
            value
            for r in ordered
            for name, value in (r.steps_s or {}).items()
            if name.split(".")[-1] == step and isinstance(value, (int, float))
        ),
        1,
    )


def write_sweep_json(experiment, ordered, out_dir, gpus, wall_s, log) -> dict:
    """sweep.json: the experiment, its [against] table and the cells' statuses; returns what it
    wrote. wall_s None: the sweep has not finished (written as it starts, so a sweep
    cut short still reports its comparisons)."""
    counts = {s: sum(1 for r in ordered if r.status == s) for s in results.STATUSES}
    summary = {
        "experiment": experiment.name,
        "path": experiment.path,
        "cells": len(experiment.cells),
        "complete": wall_s is not None,
        "wall_s": wall_s,
        "gpus": gpus or [],
        "gpu_alone_s": summed_steps(ordered, "gpu_alone_s"),
        "gpu_alone_turns": summed_steps(ordered, "gpu_alone_turns"),
        "counts": counts,
        "against": against_json(experiment.against),
        "results": [
            {k: getattr(r, k) for k in ("label", "variant", "mode", "shape", "dtype", "device")}
            | {"status": r.status, "reason": r.reason}
            for r in ordered
        ],
    }
    try:
        write_json(os.path.join(out_dir, "sweep.json"), summary)
    except OSError as exc:
        print(f"{experiment.name}: could not write sweep.json ({exc})", file=log, flush=True)
    return summary


def summary(experiment, ordered, out_dir, gpus, wall_s, log) -> None:
    """sweep.json, and the closing lines: counts per status, then each failed or wrong cell."""
    written = write_sweep_json(experiment, ordered, out_dir, gpus, wall_s, log)
    counts = written["counts"]
    print(
        f"{experiment.name}: done in {wall_s:.0f} s; "
        + ", ".join(f"{n} {s}" for s, n in counts.items()),
        file=log,
        flush=True,
    )
    if alone := written["gpu_alone_s"]:  # the floor: what its GPUs cannot overlap
        turns = written["gpu_alone_turns"]
        print(
            f"  the GPU held alone (timed calls, profiles, Inductor's benchmarks): "
            f"{alone / max(len(gpus or []), 1):.0f} s"
            + (" a GPU" if len(gpus or []) > 1 else "")
            + f", in {turns:.0f} turns",
            file=log,
            flush=True,
        )
    for r in ordered:
        if r.status in ("failed", "wrong"):
            print(
                f"  {r.status.upper()} {r.label}: {(r.reason or '')[:300]}", file=log, flush=True
            )
