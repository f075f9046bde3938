"""A sweep from what a user typed (`compilekit sweep`): the experiment loaded and checked,
the options that go together checked, on this machine's GPUs or on Ray, then the report and
the sweep page."""

from __future__ import annotations

import os

from compilekit.model.errors import UserError
from compilekit.usercell import resolve_device, sweep_gpus


def sweep(
    experiment_path: str,
    out: str | None = None,
    gpus: str | None = None,
    per_gpu: int = 4,
    force: bool = False,
    retry=(),
    fresh: bool = False,
    ray: str | None = None,
    shared_dir: bool = False,
    ray_resources: str | None = None,
) -> list:
    """Every cell of the experiment not yet done, into out (default runs/<its name>); the
    results, every cell's. UserError, before anything is written, for options that do not go
    together, a Ray that is missing or does not answer, an output folder that cannot be
    written."""
    from compilekit.evidence import envinfo
    from compilekit.launch import cache
    from compilekit.launch import sweep as local
    from compilekit.model.store import check_writable, write_json
    from compilekit.userexperiment import load_experiment

    experiment = load_experiment(experiment_path, device_resolver=resolve_device)
    print(f"{experiment.name}: {len(experiment.cells)} cells in {experiment_path}", flush=True)
    out_dir = out or os.path.join("runs", experiment.name)
    devices = {cell.device for cell in experiment.cells}
    if not ray and (shared_dir or ray_resources):
        raise UserError("--shared-dir and --ray-resources go with --ray")
    if ray and (gpus or per_gpu != 4):
        raise UserError("--gpus and --per-gpu are for a local sweep: on Ray, Ray assigns GPUs")
    if "cuda" in devices and not ray or gpus is not None:
        # Ray's nodes, not this machine, have the GPUs of a sweep on Ray
        gpus = sweep_gpus(gpus, devices)
    if ray:  # Ray there, the cluster answering, the resources readable: before any write
        from compilekit.launch import rayjoin, raysweep

        rayjoin.preflight(ray)
        resources = raysweep.parse_resources(ray_resources)
    check_writable(out_dir, "output directory", "choose another with OUT=dir (--out)")
    if ray:
        results = raysweep.run_ray_sweep(
            experiment, out_dir, address=ray, resources=resources, shared_dir=shared_dir,
            force=force, retry=retry, fresh=fresh,
        )  # fmt: skip
    else:
        env = envinfo.environment("cuda" if "cuda" in devices else "cpu", cache.default_root())
        write_json(os.path.join(out_dir, "env.json"), env)
        results = local.run_sweep(
            experiment, out_dir, gpus=gpus, force=force, retry=retry, fresh=fresh,
            per_gpu=per_gpu,
        )  # fmt: skip
    report_and_page(out_dir)
    return results


def report_and_page(out_dir: str) -> None:
    """REPORT.md, the plots and the sweep page of out_dir, the report's table printed."""
    from compilekit.report import pages, sweeppage, sweepreport

    print(sweepreport.report(out_dir))
    if path := pages.write_quietly(sweeppage.sweep_page, out_dir):
        print(f"page: {path}")
