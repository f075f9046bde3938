"""Does a host-bound call's host cost depend on the CPU's speed of the moment, or on the order of
the timed calls (GPU)?

Issue 8's fidelity check compares the toolkit's measure process with a bare one. At 1x4x128x64
the toolkit's host figure read 1.0-1.9x the bare one's in 9 of 9 pairs on 2026-12-01. The two
processes then also differed in their timing order: the toolkit timed eager and compiled with
do_bench (about 1.2 s of continuous calls) before it took the host cost; the bare child times
only compiled. Since 137adf6 the toolkit times compiled first, in the bare child's order
(cell._timed_calls); `old_order_sequence` below keeps the order before it, by hand, as the
thing compared.

In one process per callable (compilekit's variant, mode and settings, as the bare child builds
it), this script takes, after a rest each time:
- `drift`: the host cost per call (a launch-only loop of 50, as timing.host_ms_per_call) every
  0.1 s over 3 s of back-to-back calls, with the CPU's speed (dev/cpu_speed.loop_ns) beside it;
- `bare` and `old order`: the bare child's sequence (do_bench compiled, loop, host) and the
  toolkit's before 137adf6 (do_bench eager, do_bench compiled, host, loop compiled, loop
  eager), alternating.
Same process, same compiled code: a gap between the two sequences is the order's, not the
process state's. (Results: dev/results/h200/host_drift/, where the first run printed
the old order as "toolkit".)

Usage (GPU): python3 dev/host_drift.py [VARIANT:MODE ...] [--shape 1x4x128x64]
"""

from __future__ import annotations

import argparse
import statistics
import time

import cpu_speed  # dev/cpu_speed.py: a script's own folder is first on sys.path


def _build(variant_name: str, mode: str, shape: str):
    from compilekit.compile import modes, settings
    from compilekit.compile.variant import load_variant
    from compilekit.measure import inputs
    from compilekit.model.spec import parse_shape

    variant = load_variant(variant_name)
    args = inputs.make_inputs(parse_shape(shape), "bfloat16", "cuda", 0)
    stack = settings.toolkit_settings("cuda", False, {}, None)
    stack.__enter__()  # kept for the process: the bare child times inside it too
    variant.attention(*args)
    fn = modes.build(mode, variant.attention, {})
    fn(*args)
    return variant.attention, fn, args


def drift(fn, args, seconds: float = 3.0) -> list[tuple[float, float, float]]:
    """(seconds under load, host ms per call, CPU ns per loop step) every ~0.1 s."""
    from compilekit.measure import timing

    rows, start = [], time.perf_counter()
    while (elapsed := time.perf_counter() - start) < seconds:
        host = timing.host_ms_per_call(fn, args)
        rows.append((elapsed, host, cpu_speed.loop_ns()))
        until = time.perf_counter() + 0.1
        while time.perf_counter() < until:
            fn(*args)
    return rows


def bare_sequence(eager, fn, args) -> dict:
    from compilekit.measure import timing
    from compilekit.verify import bare

    median = bare.bare_median_ms(fn, args, "cuda")
    return {
        "do_bench": median,
        "loop": bare.bare_loop_ms(fn, args, 64),
        "host": timing.host_ms_per_call(fn, args),
    }


def old_order_sequence(eager, fn, args) -> dict:
    from compilekit.measure import timing

    eager_bench = timing.bench(eager, args, "cuda")
    steady = timing.bench(fn, args, "cuda")
    host = timing.host_ms_per_call(fn, args)
    loop = timing.loop_timing(fn, args, steady["median_ms"])
    timing.loop_timing(eager, args, eager_bench["median_ms"])
    return {"do_bench": steady["median_ms"], "loop": loop["median_ms"], "host": host}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cells", nargs="*", default=["sdpa:default", "naive:reduce-overhead"])
    parser.add_argument("--shape", default="1x4x128x64")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--rest", type=float, default=2.0, help="seconds idle before each block")
    opts = parser.parse_args()

    for cell in opts.cells:
        name, mode = cell.split(":")
        eager, fn, args = _build(name, mode, opts.shape)
        print(f"== {name} {mode} {opts.shape}")
        time.sleep(opts.rest)
        rows = drift(fn, args)
        print("drift under load: s, host ms/call, CPU ns/step")
        for elapsed, host, ns in rows[:: max(1, len(rows) // 12)]:
            print(f"  {elapsed:5.2f}  {host:.4f}  {ns:.1f}")
        quarter = max(1, len(rows) // 4)
        first, last = rows[:quarter], rows[-quarter:]
        print(
            "  first quarter host median %.4f (CPU %.1f), last quarter %.4f (CPU %.1f)"
            % (
                statistics.median(r[1] for r in first),
                statistics.median(r[2] for r in first),
                statistics.median(r[1] for r in last),
                statistics.median(r[2] for r in last),
            )
        )
        ratios = []
        for r in range(opts.rounds):
            got = {}
            for label, sequence in (("bare", bare_sequence), ("old order", old_order_sequence)):
                time.sleep(opts.rest)
                before = cpu_speed.loop_ns()
                figures = sequence(eager, fn, args)
                after = cpu_speed.loop_ns()
                got[label] = figures
                print(
                    f"  round {r} {label:9s} do_bench {figures['do_bench']:.4f}  loop "
                    f"{figures['loop']:.4f}  host {figures['host']:.4f}  "
                    f"CPU {before:.0f}->{after:.0f}"
                )
            ratios.append(got["old order"]["host"] / got["bare"]["host"])
        print("  host old order / bare order: " + ", ".join(f"{x:.3f}" for x in ratios))


if __name__ == "__main__":
    main()
