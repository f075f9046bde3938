"""`compilekit sweep EXPERIMENT --ray [ADDRESS]`: a sweep's cells as Ray tasks on a cluster.

Each cell not yet done becomes one task that asks for one GPU (a CPU experiment: one CPU) and
runs what a local sweep runs, `runner.launch`: the same cell processes, timeout, process-group
kill, cache and run directory. The run directory comes back to the driver as a .tar.gz through
Ray's object store and is put in place as a local sweep would (a failure never replaces a good
run), or, with --shared-dir, the task writes it straight into the output directory that every
node mounts at the same path. Done cells are never submitted again; a task whose worker or node
died is retried by Ray (max_retries) and, past that, recorded as a failed cell.

On a node, the cells of one sweep take turns the way a local sweep's do: each GPU Ray assigns
has its lock file and, where the node has cores to spare, a core for its timed calls
(compilekit/measure/locks.py); a CPU cell asks for every CPU of a node, so it runs alone.
Ray is optional (`pip install 'compilekit[ray]'`); nothing here is imported by a local sweep.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import socket
import sys
import tarfile
import tempfile
import time
from collections import Counter

from compilekit.launch import runner, sweep, sweeprecord
from compilekit.launch.rayjoin import connect, import_ray
from compilekit.measure import locks
from compilekit.model import result as results
from compilekit.model.errors import UserError
from compilekit.model.store import Busy, exclusive_lock

# a worker or node that dies mid-cell: Ray runs the task again this many times
MAX_RETRIES = 2


def task_resources(device: str, override: dict | None, node_cpus: int) -> dict:
    """What each cell's task asks of Ray: one GPU for a CUDA cell, a whole node's CPUs (the
    smallest node's count: its kernels use every core, and nothing may run beside its timed
    calls) for a CPU cell, or the user's own (--ray-resources)."""
    if override:
        return dict(override)
    return {"GPU": 1} if device == "cuda" else {"CPU": node_cpus}


def _options(resources: dict) -> dict:
    opts = {"max_retries": MAX_RETRIES, "retry_exceptions": False}
    custom = dict(resources)
    opts["num_cpus"] = custom.pop("CPU", 1)  # Ray's own default for a task
    if "GPU" in custom:
        opts["num_gpus"] = custom.pop("GPU")
    if custom:
        opts["resources"] = custom
    return opts


class Board:
    """A Ray actor that knows which cells are running on which node (tasks check in and out;
    a retried task checks in again under the same key)."""

    def __init__(self):
        self.running: dict[str, str] = {}

    def start(self, label: str, node: str) -> None:
        self.running[label] = node

    def stop(self, label: str) -> None:
        self.running.pop(label, None)

    def per_node(self) -> dict[str, int]:
        return dict(Counter(self.running.values()))


_CHECKED: dict = {}  # per worker process: the node's environment, checked once


def _check_node(driver_version: str) -> dict:
    """Before a worker's first cell: compilekit imports, torch and triton are there, and this
    node runs the driver's compilekit; the node's facts, or a reason it cannot measure."""
    if not _CHECKED:
        from compilekit import __version__
        from compilekit.evidence.envinfo import installed_version

        facts = {"host": socket.gethostname(), "compilekit": __version__}
        facts.update({name: installed_version(name) for name in ("torch", "triton")})
        problem = None
        if __version__ != driver_version:
            problem = f"runs compilekit {__version__}, the driver {driver_version}"
        elif facts["torch"] is None:
            problem = "has no torch installed"
        facts["problem"] = (
            f"node {facts['host']} {problem}: install the same compilekit there"
            if problem
            else None
        )
        _CHECKED.update(facts)
    return dict(_CHECKED)


def run_cell_task(cell_data: dict, task: dict, board) -> dict:
    """A Ray task: one cell on this node. Returns {"result": result.json's dict, "node": host,
    "archive": the run directory as .tar.gz bytes, or None when written to the shared dir}."""
    from compilekit.model.spec import Cell

    cell = Cell.from_dict(cell_data)
    node = _check_node(task["compilekit"])
    if node["problem"]:
        failed = results.for_cell(cell, status="failed", reason=node["problem"])
        return {"result": failed.to_dict(), "node": node["host"], "archive": None}
    board.start.remote(cell.label(), node["host"])
    try:
        return _measure(cell, task, node)
    finally:
        board.stop.remote(cell.label())


def _host_gpus(visible: str) -> list[str]:
    """Every GPU of this node (the driver lists one folder per GPU), so each cell's quiet core
    is kept off by all the others (locks.core_plan); the visible ones where the driver does
    not say."""
    try:
        count = len(os.listdir("/proc/driver/nvidia/gpus"))
    except OSError:
        count = 0
    return [str(i) for i in range(count)] or visible.split(",")


def _measure(cell, task: dict, node: dict) -> dict:
    env = {}
    gpus = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    if cell.device == "cuda" and gpus:  # the GPU Ray gave this task, locked like a local one
        env["CUDA_VISIBLE_DEVICES"] = gpus
        env.update((locks.core_plan(_host_gpus(gpus)) or {}).get(gpus.split(",")[0], {}))
        env["COMPILEKIT_GPU_LOCK"] = os.path.join(
            tempfile.gettempdir(), f"compilekit-gpu{gpus.split(',')[0]}.lock"
        )
    out = task["shared_dir"] or tempfile.mkdtemp(prefix="compilekit-ray-")
    try:
        result = sweep.launch_or_record(
            cell,
            out,
            cache_root=task["cache_root"],
            fresh=task["fresh"],
            timeout_s=task["timeout_s"],
            env=env,
        )
        archive = None
        run_dir = os.path.join(out, cell.label())
        if not task["shared_dir"] and os.path.isdir(run_dir):
            buffer = io.BytesIO()
            with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
                tar.add(run_dir, arcname=".")  # unpacked straight into the driver's stage
            archive = buffer.getvalue()
        return {"result": result.to_dict(), "node": node["host"], "archive": archive}
    finally:
        if not task["shared_dir"]:
            shutil.rmtree(out, ignore_errors=True)


def _unpack(cell, reply: dict, out_dir: str) -> results.CellResult:
    """Put a task's run directory in place under out_dir, as runner.launch would."""
    result = results.from_dict(reply["result"], f"the Ray task's result for {cell.label()}")
    run_dir = os.path.join(out_dir, cell.label())
    if reply["archive"] is None:  # shared dir (already in place), or the node refused the cell
        if not os.path.isdir(run_dir) or result.status == "failed":
            return result
        return results.load(run_dir)
    stage = f"{run_dir}.tmp-{os.getpid()}"
    shutil.rmtree(stage, ignore_errors=True)
    os.makedirs(stage)
    with tarfile.open(fileobj=io.BytesIO(reply["archive"]), mode="r:gz") as tar:
        tar.extractall(stage, filter="data")
    return runner.place(results.load(stage), stage, run_dir)


def run_ray_sweep(
    experiment,
    out_dir: str,
    address: str = "auto",
    resources: dict | None = None,
    shared_dir: bool = False,
    force: bool = False,
    retry=(),
    cache_root: str | None = None,
    fresh: bool = False,
    log=None,
) -> list[results.CellResult]:
    """Run every missing cell of the experiment as a Ray task; returns every cell's result."""
    log = log or sys.stdout  # the stdout of the call, not of the import
    ray = import_ray()
    os.makedirs(out_dir, exist_ok=True)
    try:
        with exclusive_lock(os.path.join(out_dir, ".compilekit-sweep.lock")):
            done, todo = sweep.select_cells(experiment, out_dir, force, retry, log)
            connect(ray, address)
            try:
                return _run(
                    ray, experiment, out_dir, done, todo, resources, shared_dir, cache_root,
                    fresh, log,
                )  # fmt: skip
            finally:
                ray.shutdown()
    except Busy as busy:
        raise UserError(
            f"another compilekit sweep (PID {busy.pid}) is writing into {out_dir!r}: wait for "
            "it, or choose another OUT"
        ) from None


def _run(ray, experiment, out_dir, done, todo, resources, shared_dir, cache_root, fresh, log):
    from compilekit import __version__

    total, pending = len(experiment.cells), len(todo)
    alive = [n for n in ray.nodes() if n.get("Alive")]
    nodes = sorted({n.get("NodeManagerHostname", "?") for n in alive})
    node_cpus = min((int(n.get("Resources", {}).get("CPU", 1)) for n in alive), default=1)
    print(
        f"{experiment.name}: {total} cells, {total - pending} already done, {pending} to run "
        f"on Ray ({len(nodes)} node{'s' * (len(nodes) != 1)}: {', '.join(nodes)})",
        file=log,
        flush=True,
    )
    remote = ray.remote(run_cell_task)
    board = ray.remote(num_cpus=0)(Board).remote()
    task = {
        "compilekit": __version__,
        "shared_dir": os.path.abspath(out_dir) if shared_dir else None,
        "cache_root": cache_root,
        "fresh": fresh,
    }
    in_flight, start = {}, time.perf_counter()
    # submitted longest first: Ray starts tasks about in that order (a CUDA cell's task takes
    # a whole GPU unless --ray-resources says less)
    for cell in sweep.longest_first(todo):
        res = task_resources(cell.device, resources, node_cpus)
        ref = remote.options(**_options(res)).remote(
            cell.to_dict(),
            {**task, "timeout_s": experiment.timeout_s.get(cell.label(), 900)},
            board,
        )
        in_flight[ref] = cell
    finished_on: Counter = Counter()  # cells finished per node, for the progress line
    finished = 0
    try:
        while in_flight:
            ready, _ = ray.wait(list(in_flight), num_returns=1)
            cell = in_flight.pop(ready[0])
            try:
                reply = ray.get(ready[0])
                result = _unpack(cell, reply, out_dir)
                finished_on[reply["node"]] += 1
            except Exception as exc:  # noqa: BLE001 (the task died past its retries, a bad reply)
                first = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
                result = sweep.failed_result(
                    cell, f"the Ray task failed ({type(exc).__name__}: {first})"
                )
            done[cell.label()] = result
            finished += 1
            failed = sum(1 for r in done.values() if r.status in ("failed", "wrong"))
            left_s = (pending - finished) * (time.perf_counter() - start) / finished
            board.stop.remote(cell.label())  # a task whose worker died never checked out
            running = ray.get(board.per_node.remote())
            queued = max(0, len(in_flight) - sum(running.values()))
            nodes = (
                f"  [running: {', '.join(f'{n} {k}' for n, k in sorted(running.items())) or '-'}"
                f"; queued {queued}; done: "
                + (", ".join(f"{n} {k}" for n, k in sorted(finished_on.items())) or "-")
                + "]"
            )
            position = total - pending + finished
            print(
                sweep.progress_line(position, total, cell, result, failed, left_s, nodes),
                file=log,
                flush=True,
            )
    except KeyboardInterrupt:
        for ref in in_flight:
            ray.cancel(ref, force=True)
        print(
            f"{experiment.name}: interrupted; {len(in_flight)} Ray task(s) cancelled, finished "
            "cells are kept: run the same command again to resume",
            file=log,
            flush=True,
        )
        raise
    ordered = [done[c.label()] for c in experiment.cells]
    sweeprecord.summary(experiment, ordered, out_dir, None, time.perf_counter() - start, log)
    return ordered


def parse_resources(text: str | None) -> dict | None:
    """--ray-resources '{"GPU": 1, "H100": 1}' -> dict; one line when it is not that."""
    if not text:
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UserError(
            f"--ray-resources is not JSON ({exc.msg}): e.g. '{{\"GPU\": 1}}'"
        ) from None
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, (int, float)) and v >= 0 for k, v in value.items()
    ):
        raise UserError("--ray-resources must map resource names to amounts, e.g. '{\"GPU\": 1}'")
    return value
