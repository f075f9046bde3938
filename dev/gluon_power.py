"""gluon-flash's schedules in long back-to-back loops: time per call, SM clock, power, cycles.

A kernel that keeps the tensor cores and the exp units busier at once may draw more power, and
a GPU held at its power limit then lowers its clock: a schedule can take fewer cycles a call
and still more time. Each contender runs back to back for --seconds (no L2 flush between
calls: the sustained state of a timed loop), its turns alternating with the others' --rounds
times, while nvidia-smi samples the SM clock and the power draw; a segment's first second is
left out of its means (nvidia-smi's power is an average that takes about a second to follow a
switch; the clock is read as it is). Cycles a call = ms a call x mean MHz, and the energy a
call = ms a call x mean watts.

Beside each loop, a burst timed as FlashAttention-3's benchmark times its kernels (the method
behind its paper's TFLOP/s, hopper/benchmark_flash_attention.py): one second idle "to avoid
residual power throttling", then torch.utils.benchmark's two warm-up calls and the mean of
--burst calls (30 there), here timed with device events. A burst of a few milliseconds after
an idle second ends before the power limit bites, so it reads the kernel near its boost clock:
the figure to set beside FA3's, where the loop's is the one a long run sees.

Usage (GPU): python dev/gluon_power.py [--shapes 2x32x4096x128,...]
             [--gluon-tiles 128x128x4x3xpxq2xkxn] [--seconds 4] [--rounds 3] [--burst 30]
             [--csv samples.csv]
(`--gluon-tiles` as in dev/triton_flash_bench.py; cuDNN SDPA and gluon-flash's default always)
"""

from __future__ import annotations

import argparse
import datetime
import os
import shutil
import statistics
import subprocess
import tempfile
import time

import torch
from triton_flash_bench import gluon_tile_contenders, gluon_tiles  # dev/ is first on sys.path

from compilekit.compile.variant import load_variant
from compilekit.model.spec import parse_shape
from compilekit.variants.masks import causal_flops
from compilekit.verify.bare import bare_loop_ms

RAMP_S = 1.0  # a segment's first second of power readings still shows the switch
BURST_IDLE_S = 1.0  # FA3's benchmark sleeps this long before timing each contender
BURST_WARMUP = 2  # torch.utils.benchmark.Timer.timeit(30)'s warm-up: max(30 // 100, 2) calls


def loop_ms(fn, args, seconds: float) -> tuple[float, float, float]:
    """(ms a call, wall start, wall end) of `fn` called back to back for about `seconds`."""
    fn(*args)
    torch.cuda.synchronize()
    t = time.perf_counter()
    fn(*args)
    torch.cuda.synchronize()
    calls = max(10, int(seconds / max(time.perf_counter() - t, 1e-6)))
    wall0 = time.time()
    ms = bare_loop_ms(fn, args, calls, repeats=1)
    return ms, wall0, time.time()


def burst_ms(fn, args, calls: int) -> float:
    """ms a call of `calls` calls timed as one block after BURST_IDLE_S idle and BURST_WARMUP
    warm-up calls: FlashAttention-3's benchmark method, with device events for its host timer."""
    torch.cuda.synchronize()
    time.sleep(BURST_IDLE_S)
    for _ in range(BURST_WARMUP):
        fn(*args)
    return bare_loop_ms(fn, args, calls, repeats=1)


def read_samples(path: str) -> list[tuple[float, float, float]]:
    """nvidia-smi's CSV lines as (epoch seconds, SM MHz, watts)."""
    out = []
    with open(path) as f:
        lines = f.readlines()
    for line in lines:
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 3 or "MHz" not in parts[1]:
            continue
        stamp = datetime.datetime.strptime(parts[0], "%Y/%m/%d %H:%M:%S.%f").timestamp()
        out.append((stamp, float(parts[1].split()[0]), float(parts[2].split()[0])))
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", default="2x32x4096x128,3x24x3072x128")
    parser.add_argument("--gluon-tiles", default="128x128x4x3xpxq2xkxn")
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--burst", type=int, default=30, help="calls in FA3's timed burst (0: no bursts)"
    )
    parser.add_argument("--csv", help="keep nvidia-smi's samples here")
    args = parser.parse_args(argv)
    if args.burst < 0 or args.rounds < 1 or args.seconds <= 0:
        parser.exit(2, "gluon_power.py: give --burst 0 or more, --rounds 1 or more and "
                    "--seconds above 0\n")  # fmt: skip
    if not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] != 9:
        parser.exit(2, "gluon_power.py: needs a Hopper GPU (gluon-flash runs on sm90 only)\n")
    if shutil.which("nvidia-smi") is None:
        parser.exit(2, "gluon_power.py: needs nvidia-smi on PATH to read the clock and power\n")
    fns = {"gluon-flash default": load_variant("gluon-flash").attention}
    fns.update(gluon_tile_contenders(gluon_tiles(args.gluon_tiles)))
    fns["cuDNN SDPA"] = load_variant("sdpa-cudnn").attention
    scratch = tempfile.TemporaryDirectory()
    csv = args.csv or os.path.join(scratch.name, "samples.csv")
    sampler = subprocess.Popen(
        ["nvidia-smi", "--query-gpu=timestamp,clocks.sm,power.draw", "--format=csv,noheader",
         "-lms", "50", "-f", csv]
    )  # fmt: skip
    segments, bursts = [], []
    try:
        time.sleep(1)
        for shape in args.shapes.split(","):
            d = parse_shape(shape)
            q, k, v = (
                torch.randn(d.batch, d.heads, d.seq, d.head_dim, device="cuda",
                            dtype=torch.bfloat16) for _ in "qkv"
            )  # fmt: skip
            for _ in range(args.rounds):
                for name, fn in fns.items():
                    if args.burst:
                        bursts.append((shape, name, burst_ms(fn, (q, k, v), args.burst)))
                    ms, t0, t1 = loop_ms(fn, (q, k, v), args.seconds)
                    segments.append((shape, name, ms, t0 + RAMP_S, t1))
    finally:
        time.sleep(0.2)
        sampler.terminate()
        sampler.wait()
    print(torch.cuda.get_device_name(), f"torch {torch.__version__}, bf16, causal, loops of "
          f"{args.seconds} s, {args.rounds} turns each, nvidia-smi every 50 ms; bursts of "
          f"{args.burst} calls after {BURST_IDLE_S:.0f} s idle (FA3's method)")  # fmt: skip
    for line in report(fns, segments, bursts, read_samples(csv)):
        print(line)
    return 0


def report(fns, segments, bursts, samples) -> list[str]:
    """The table's lines: per shape and contender, the loops' median ms, TFLOP/s, mean MHz and
    watts over their samples, Mcycles and mJ a call, then the bursts' median ms and TFLOP/s."""
    width = max(map(len, fns))
    lines = [
        f"{'shape':16} {'contender':{width}} {'ms':>8} {'TFLOP/s':>8} {'MHz':>6} {'W':>6} "
        f"{'Mcycles':>8} {'mJ':>6} {'burst ms':>9} {'TFLOP/s':>8}  turns (ms)"
    ]
    for shape in dict.fromkeys(s[0] for s in segments):
        flops = causal_flops(parse_shape(shape))
        for name in fns:
            mine = [s for s in segments if s[:2] == (shape, name)]
            inside = [x for _, _, _, t0, t1 in mine for x in samples if t0 <= x[0] <= t1]
            ms = statistics.median(s[2] for s in mine)
            mhz = statistics.mean(x[1] for x in inside) if inside else float("nan")
            watts = statistics.mean(x[2] for x in inside) if inside else float("nan")
            burst = [b[2] for b in bursts if b[:2] == (shape, name)]
            b_ms = statistics.median(burst) if burst else float("nan")
            turns = ", ".join(f"{s[2]:.4f}" for s in mine)
            lines.append(
                f"{shape:16} {name:{width}} {ms:8.4f} {flops / ms / 1e9:8.1f} {mhz:6.0f} "
                f"{watts:6.1f} {ms * mhz / 1e3:8.3f} {ms * watts:6.1f} {b_ms:9.4f} "
                f"{flops / b_ms / 1e9:8.1f}  {turns}"
            )
    return lines


if __name__ == "__main__":
    raise SystemExit(main())
