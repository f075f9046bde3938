"""Which of the toolkit's steps before its timed calls slow a host-bound call: a leader process
that runs the named steps, then times loops by turns against a bare follower (verify's child),
both on one CPU, as `compilekit verify --paired` pairs them (compilekit/turns.py).

On the H200 (2026-12-01), compiled sdpa at 1x4x128x64 read 1.020-1.075 over its bare partner
in 5 such pairs, where two bare processes read 0.969-0.991 (naive reduce-overhead): something
the toolkit's measure process did before timing cost it. Each step here is one candidate:
  none       a bare leader: what the steps are set against
  reference  the dtype probe, the float64 reference and the error checks before the timed
             calls (the measure process's order before 2026-12-02)
  timer      the cell's watchdog thread (threading.Timer) alive during the timed calls
  skiplog    the warm compile inside diagnose.cudagraph_skip_reasons() (a DEBUG logger)
  bench      do_bench as the toolkit calls it (timing.bench) in place of the bare one

Usage: python3 experiments/pre_steps.py RUN_DIR [--steps none reference ...] [--pairs 3]
       [--turns 60] [--cpu N|free]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import threading
from types import SimpleNamespace

from compilekit import pairstats, runner, turns, verify

STEPS = ("none", "reference", "timer", "skiplog", "bench")


def lead(cell_json: str, channel: str, calls: int, turns_taken: int, steps: set) -> None:
    """The leader's process: the cell's inputs, one eager call, a warm compile, with `steps`."""
    from compilekit import diagnose, inputs, modes, settings, timing
    from compilekit.spec import Cell
    from compilekit.variant import load_variant

    cell = Cell.from_dict(json.loads(cell_json))
    variant = load_variant(cell.variant)
    cuda = cell.device == "cuda"
    with settings.toolkit_settings(cell.device, False, dict(cell.config)):
        if "reference" in steps:
            inputs.dtype_probe(cell.dtype, cell.device)
        args = inputs.make_inputs(cell.shape, cell.dtype, cell.device, cell.seed)
        eager = variant.attention(*args)
        if "reference" in steps:
            ref, _ = inputs.reference_output(variant, *args)
            inputs.max_rel_err(eager, ref)
        del eager
        fn = modes.build(cell.mode, variant.attention, dict(cell.config))
        logged = diagnose.cudagraph_skip_reasons() if "skiplog" in steps else None
        with logged or contextlib.nullcontext():
            fn(*args)
        if "reference" in steps:
            inputs.max_rel_err(fn(*args), ref)
            del ref
        if "timer" in steps:
            timer = threading.Timer(3600.0, lambda: None)
            timer.daemon = True
            timer.start()
        if "bench" in steps:
            timing.bench(fn, args, cell.device)
        else:
            verify.bare_median_ms(fn, args, cell.device)
        leader = turns.Leader(channel)
        for _ in range(turns_taken):
            leader.hand_over(calls, *verify.one_loop(fn, args, calls, cuda))
        leader.end()


def pair(cell, env: dict, calls: int, turns_taken: int, cpu, steps: str) -> list:
    """One pair's turns: [[leader ms, leader ns, follower ms, follower ns], ...]."""

    def leader(channel: str):
        command = [sys.executable, __file__, "--lead", channel, json.dumps(cell.to_dict()),
                   str(calls), str(turns_taken), steps]  # fmt: skip
        proc = subprocess.run(command, env=env, capture_output=True, text=True)
        if proc.returncode:
            print(f"  leader failed: {proc.stderr.strip().splitlines()[-1:]}", flush=True)
        return SimpleNamespace(measured=proc.returncode == 0)

    _, bare = verify._pair_by_turns(cell, env, calls, "", "", cpu, lead=leader)
    return bare.get("turns") or []


def main() -> None:
    if sys.argv[1:2] == ["--lead"]:
        channel, cell_json, calls, turns_taken, steps = sys.argv[2:7]
        lead(cell_json, channel, int(calls), int(turns_taken), set(steps.split(",")))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir")
    parser.add_argument(
        "--steps",
        nargs="+",
        default=["none", "reference"],
        help=f"step sets, each comma-separated from {', '.join(STEPS)}",
    )
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--turns", type=int, default=60)
    parser.add_argument("--cpu", default=str(verify.turns_cpu()))
    args = parser.parse_args()
    unknown = {s for group in args.steps for s in group.split(",")} - set(STEPS)
    if unknown:
        parser.exit(2, f"unknown steps {sorted(unknown)}: choose from {', '.join(STEPS)}\n")
    cpu = None if args.cpu == "free" else int(args.cpu)
    result, cell = verify._measured_cell(args.run_dir)
    calls = verify._figure(result).calls or 20
    env = verify._bare_env(cell, os.environ.get("COMPILEKIT_CACHE") or runner.default_cache_root())
    ratios: dict[str, list[float]] = {}
    for i in range(args.pairs):  # step sets by turns too: each pair's host of the moment
        for steps in args.steps:
            rows = pair(cell, env, calls, args.turns, cpu, steps)
            ratio = turns.median_ratio(rows)
            if ratio is None:
                print(f"{steps}: pair {i + 1}: {len(rows)} turns, no ratio", flush=True)
                continue
            leader = statistics.median(r[0] for r in rows)
            follower = statistics.median(r[2] for r in rows)
            print(
                f"{steps}: pair {i + 1}: {len(rows)} turns, steps' leader over bare follower "
                f"{ratio:.3f} ({leader:.4f} / {follower:.4f} ms)",
                flush=True,
            )
            ratios.setdefault(steps, []).append(ratio)
    for steps, each in ratios.items():
        decision = pairstats.decide(each, 0.05)
        span = f"; 90% interval {decision.low:.3f}-{decision.high:.3f}" if decision.low else ""
        print(f"{steps}: {', '.join(f'{r:.3f}' for r in each)}{span}")


if __name__ == "__main__":
    main()
