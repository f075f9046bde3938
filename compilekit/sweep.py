"""A whole experiment: every cell in its own subprocess, resumable, one cell per GPU at a time.

Cells already in the output directory are kept unless forced; a cell that fails or cannot run
records why and the sweep goes on; each cell's run directory appears atomically, so an
interrupted sweep loses at most the cells in flight.
"""

from __future__ import annotations

import json
import os
import queue
import sys
import tempfile
import threading
import time

from compilekit import runner
from compilekit.spec import Experiment
from compilekit.sweepreport import cell_status


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def clean_stale(out_dir: str) -> None:
    """Remove what a killed sweep left half-done: staging directories (`<cell>.tmp-<pid>`) of
    processes that are gone; a replaced result (`<cell>.old-<pid>`) goes back into place if its
    successor never arrived."""
    import re
    import shutil

    for name in os.listdir(out_dir):
        m = re.match(r"^(.*)\.(tmp|old)-(\d+)$", name)
        if not m or _alive(int(m[3])):
            continue
        path, final = os.path.join(out_dir, name), os.path.join(out_dir, m[1])
        if m[2] == "old" and not os.path.exists(final):
            os.replace(path, final)
        else:
            shutil.rmtree(path, ignore_errors=True)


def cell_done(run_dir: str, retry_failed: bool) -> dict | None:
    """The stored result of a finished cell, or None if it must (re)run."""
    path = os.path.join(run_dir, "result.json")
    if not os.path.isfile(path):
        return None
    with open(path) as f:
        result = json.load(f)
    if result.get("format_version") != runner.RESULT_VERSION:
        return None
    if retry_failed and result.get("error"):
        return None
    return result


def _status(result: dict) -> str:
    """The report's cell status, with the latency when ok and FAILED loud in a progress line."""
    status = cell_status(result)
    if status == "ok":
        return f"ok {result['compiled_ms']:.3f} ms"
    return "FAILED" if status == "failed" else status


def run_sweep(
    experiment: Experiment,
    out_dir: str,
    gpus: list[str] | None = None,
    force: bool = False,
    retry_failed: bool = False,
    cache_root: str | None = None,
    fresh: bool = False,
    per_gpu: int = 4,
    log=sys.stdout,
) -> list[dict]:
    """Run every missing cell of the experiment into out_dir; returns every cell's result.

    gpus: CUDA device indices to spread cells over; None or [] runs one cell at a time on the
    default device. Each GPU gets `per_gpu` cell processes at once, but a lock file per GPU lets
    only one of them use the GPU at a time (runner.gpu_lock): the others import torch and start
    up meanwhile, and every cell is timed with nothing else on its GPU.
    """
    os.makedirs(out_dir, exist_ok=True)
    clean_stale(out_dir)
    results: dict[str, dict] = {}
    todo: queue.Queue = queue.Queue()
    for cell in experiment.cells:
        done = None if force else cell_done(os.path.join(out_dir, cell.label()), retry_failed)
        if done is not None:
            results[cell.label()] = done
        else:
            todo.put(cell)
    total, pending = len(experiment.cells), todo.qsize()
    print(
        f"{experiment.name}: {total} cells, {total - pending} already done, {pending} to run"
        + (f" on GPUs {','.join(gpus)}" if gpus else ""),
        file=log,
        flush=True,
    )
    lock, start = threading.Lock(), time.perf_counter()
    finished = 0
    workers = [gpu for gpu in gpus for _ in range(per_gpu)] if gpus else [None]

    def work(gpu):
        env = None
        if gpu is not None:
            env = {
                "CUDA_VISIBLE_DEVICES": gpu,
                "COMPILEKIT_GPU_LOCK": os.path.join(
                    tempfile.gettempdir(), f"compilekit-gpu{gpu}.lock"
                ),
            }
        nonlocal finished
        while True:
            try:
                cell = todo.get_nowait()
            except queue.Empty:
                return
            result = runner.launch(
                cell,
                out_dir,
                cache_root=cache_root,
                fresh=fresh,
                timeout_s=experiment.timeout_s.get(cell.label(), 900),
                env=env,
            )
            with lock:
                results[cell.label()] = result
                finished += 1
                failed = sum(1 for r in results.values() if r.get("error"))
                left_s = (pending - finished) * (time.perf_counter() - start) / finished
                print(
                    f"[{total - pending + finished}/{total}] {cell.variant} {cell.mode} "
                    f"{cell.shape} {cell.dtype}: {_status(result)}  ({failed} failed, "
                    f"~{left_s / 60:.1f} min left)",
                    file=log,
                    flush=True,
                )
                if result.get("error"):
                    print(
                        f"    reason: {result['error'].splitlines()[0][:200]}",
                        file=log,
                        flush=True,
                    )

    threads = [threading.Thread(target=work, args=(gpu,), daemon=True) for gpu in workers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ordered = [results[c.label()] for c in experiment.cells if c.label() in results]
    summary = {
        "experiment": experiment.name,
        "path": experiment.path,
        "cells": len(ordered),
        "wall_s": time.perf_counter() - start,
        "gpus": gpus or [],
        "results": [
            {k: r.get(k) for k in ("variant", "mode", "shape", "dtype", "device")}
            | {"status": _status(r)}
            for r in ordered
        ],
    }
    tmp = os.path.join(out_dir, "sweep.json.tmp")
    with open(tmp, "w") as f:
        json.dump(summary, f, indent=2)
    os.replace(tmp, os.path.join(out_dir, "sweep.json"))
    print(
        f"{experiment.name}: done in {summary['wall_s']:.0f} s; "
        f"{sum(1 for r in ordered if r.get('error'))} failed, "
        f"{sum(1 for r in ordered if r.get('unsupported'))} unsupported",
        file=log,
        flush=True,
    )
    return ordered
