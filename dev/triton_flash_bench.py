"""triton-flash against cuDNN SDPA and compiled FlexAttention, back to back in one process.

For each shape (bf16, causal): device time per call (triton.testing.do_bench median; the
contenders take turns, --rounds times, and the row is the median turn with the range beside it;
fresh random inputs, outputs checked against cuDNN first), TFLOP/s, and the host time per call (a
launch-only loop: what the CPU spends issuing one call), read beside the CPU's speed of the moment
(dev/cpu_speed.loop_ns before and after each contender's host loops, the `CPU ns` column:
the H200's VM switches between about 45 and 85 ns per step within a second, and a host figure
follows it). Rows:
- triton-flash eager (the variant as a user calls it), and compiled (torch.compile default),
  with the config eager autotuning chose (which compiled is given too);
- on a Hopper GPU, gluon-flash eager and compiled (an opaque custom op there), and with
  `--gluon-tiles` gluon-flash eager at other tile sizes (its default: gluon_flash.tiles(D, S));
- `--baseline FILE`: another copy of variants/triton_flash.py, eager, for a before/after;
  `--gluon-baseline FILE` the same for variants/gluon_flash.py;
- cuDNN SDPA eager (the variant sdpa-cudnn) and FlexAttention compiled (the variant flex);
- `--reduce-overhead`: both kernels under torch.compile's reduce-overhead, their inputs marked
  static (torch._dynamo.mark_static_address): the CUDA graph reads q, k and v in place, as it
  reads tensors a model's graph made itself, where a cell's fresh inputs are copied into the
  graph's buffers before each replay.

Usage (GPU): python dev/triton_flash_bench.py [--shapes 8x16x1024x64,...]
             [--baseline old_triton_flash.py] [--gluon-baseline old_gluon_flash.py]
             [--gluon-tiles 64x64x4x3,128x128x8x3] [--json out.json]
`--gluon-tiles`: BLOCK_MxBLOCK_Nxnum_warpsxSTAGES each, `xws` appended for the warp-specialized
schedule (num_warps 4: consumer 0; a loader warp and consumer 1 are added), `xp` for the same on
a persistent grid (one program per SM), then `xq2` for two query buffers (Q_STAGES) and `xk`
for K's ring a slot shorter than V's (SHORT_K), `xn` for consumers that issue their wgmmas
without turns (PINGPONG False: "free issue"); `@N` after any tile runs it with N (batch, head)
rows of tiles a group (L2_HEADS: launch.l2_group_heads picks it else); a tile
that does not fit a shape (BLOCK_N over 128 at D = 128 runs out of shared memory) is that row's
error.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys

import cpu_speed  # dev/cpu_speed.py: a script's own folder is first on sys.path
import torch

from compilekit.compile.variant import load_variant
from compilekit.measure import timing
from compilekit.measure.inputs import mark_static
from compilekit.model.spec import parse_shape
from compilekit.variants.masks import causal_flops

SHAPES = "8x16x1024x64,1x32x8192x128,16x16x512x64,1x32x16384x128,2x32x4096x128"


@functools.cache  # a custom op registers once per process, and every shape reuses it
def baseline_module(path: str):
    """An older copy of variants/triton_flash.py (or gluon_flash.py), loaded beside the current
    one. Its op is renamed into a namespace of its own (an op named "compilekit::...", or a
    Library on OP_NAMESPACE): registered under the current op's name, it would replace that
    op, and "triton-flash compiled" would then run the baseline's kernel (which made compiled
    read as slow as the baseline in this bench's runs up to 2026-12-01)."""
    import types

    with open(path) as f:
        source = (
            f.read()
            .replace('"compilekit::', '"compilekit_baseline::')  # custom ops, triton_op
            .replace('OP_NAMESPACE = "compilekit"', 'OP_NAMESPACE = "compilekit_baseline"')
        )
    module = types.ModuleType("baseline_flash")
    module.__file__ = path
    exec(compile(source, path, "exec"), module.__dict__)
    return module


def gluon_tiles(text: str) -> list[dict]:
    """'64x64x4x3,128x128x4x3xws,128x128x4x3xp,128x128x4x3xpxq2xk' -> [{"BLOCK_M": 64,
    "BLOCK_N": 64, "num_warps": 4, "STAGES": 3, "WS": False, "PERSISTENT": False}, {...,
    "WS": True, "PERSISTENT": False}, {..., "WS": True, "PERSISTENT": True, "Q_STAGES": 1,
    "SHORT_K": False, "PINGPONG": True}, {..., "Q_STAGES": 2, "SHORT_K": True, ...}] (xn: the
    consumers issue freely, "PINGPONG": False); ValueError names the item that
    is not BLOCK_MxBLOCK_Nxwarpsxstages[xws|xp[xqN][xk][xn]][@L2_HEADS]; '64x64x4x3@32' adds
    "L2_HEADS": 32."""
    # both flags in every tile: a tile merges into gluon_flash.tiles(D, S), whose flags stay else
    kinds = {"ws": {"WS": True, "PERSISTENT": False}, "p": {"WS": True, "PERSISTENT": True}}
    out = []
    for item in filter(None, text.split(",")):
        tile_text, at, l2_heads = item.partition("@")
        fields = tile_text.split("x")
        try:
            l2 = {"L2_HEADS": int(l2_heads)} if at else {}
            if at and l2["L2_HEADS"] < 1:
                raise ValueError
            m, n, warps, stages = (int(x) for x in fields[:4])
            kind = kinds[fields[4]] if len(fields) > 4 else {"WS": False, "PERSISTENT": False}
            # a persistent tile names its query buffers and K ring (the default's merge in else)
            ring = {}
            if kind["PERSISTENT"]:
                rest = fields[5:]
                free_issue = rest[-1:] == ["n"]  # the consumers issue freely, no turns
                rest = rest[:-1] if free_issue else rest
                short_k = rest[-1:] == ["k"]
                rest = rest[:-1] if short_k else rest
                if len(rest) > 1 or (rest and rest[0][:1] != "q"):
                    raise ValueError
                ring = {
                    "Q_STAGES": int(rest[0][1:]) if rest else 1, "SHORT_K": short_k,
                    "PINGPONG": not free_issue,
                }  # fmt: skip
            elif len(fields) > 5:  # a suffix left over
                raise ValueError
        except (ValueError, KeyError, IndexError):
            raise ValueError(
                f"--gluon-tiles {item!r} is not "
                "BLOCK_MxBLOCK_Nxwarpsxstages[xws|xp[xqN][xk][xn]][@L2_HEADS] "
                "(e.g. 128x128x8x3, 128x128x4x3xpxq2xk or 64x64x4x3@32)"
            ) from None
        tile = {"BLOCK_M": m, "BLOCK_N": n, "num_warps": warps, "STAGES": stages}
        out.append(tile | kind | ring | l2)
    return out


def gluon_tile_contenders(tiles) -> dict:
    """name -> gluon-flash eager at each tile set of gluon_tiles(), causal; the name says
    every field that sets the tile apart."""
    from compilekit.variants import gluon_flash

    out = {}
    for t in tiles:
        name = "gluon {BLOCK_M}x{BLOCK_N} w{num_warps} s{STAGES}".format(**t)
        name += " persistent" if t.get("PERSISTENT") else " ws" if t.get("WS") else ""
        name += f" q{t['Q_STAGES']}" if t.get("PERSISTENT") else ""
        name += " short K" if t.get("SHORT_K") else ""
        name += " free issue" if t.get("PINGPONG") is False else ""
        name += f" L2 {t['L2_HEADS']} heads" if "L2_HEADS" in t else ""
        out[name] = functools.partial(gluon_flash.flash_attention, causal=True, **t)
    return out


REDUCE_OVERHEAD = " reduce-overhead"  # a contender whose inputs are marked static


def contenders(
    baseline: str | None,
    gluon_baseline=None,
    tiles=(),
    reduce_overhead: bool = False,
    eager_only: bool = False,
) -> dict:
    """name -> callable(q, k, v); the compiled ones are compiled on first use (eager_only: none
    of them, flex neither)."""
    flash = load_variant("triton-flash").attention
    out = {"triton-flash eager": flash}
    if not eager_only:
        out["triton-flash compiled"] = torch.compile(flash)
    if reduce_overhead:
        out["triton-flash" + REDUCE_OVERHEAD] = torch.compile(flash, mode="reduce-overhead")
    if baseline:
        out["baseline eager"] = baseline_module(baseline).attention
    if torch.cuda.get_device_capability()[0] == 9:  # gluon-flash runs on Hopper only
        gluon = load_variant("gluon-flash").attention
        out["gluon-flash eager"] = gluon
        if not eager_only:
            out["gluon-flash compiled"] = torch.compile(gluon)
        if reduce_overhead:
            out["gluon-flash" + REDUCE_OVERHEAD] = torch.compile(gluon, mode="reduce-overhead")
        out.update(gluon_tile_contenders(tiles))
        if gluon_baseline:
            out["gluon baseline eager"] = baseline_module(gluon_baseline).attention
    out["cuDNN SDPA eager"] = load_variant("sdpa-cudnn").attention
    if not eager_only:
        out["flex compiled"] = torch.compile(load_variant("flex").attention)
    return out


def bench_shape(shape: str, fns: dict, rounds: int = 3) -> list[dict]:
    """One row per contender at `shape`: device ms (median over `rounds` turns), TFLOP/s, host
    µs per call, error."""
    dims = parse_shape(shape)
    gen = torch.Generator(device="cuda").manual_seed(dims.seq * dims.head_dim)
    q, k, v = (
        torch.randn(
            dims.batch,
            dims.heads,
            dims.seq,
            dims.head_dim,
            device="cuda",
            dtype=torch.bfloat16,
            generator=gen,
        )
        for _ in range(3)
    )
    if any(name.endswith(REDUCE_OVERHEAD) for name in fns):
        mark_static((q, k, v))  # the same tensors every call
    truth = fns["cuDNN SDPA eager"](q, k, v).float()
    flops = causal_flops(dims)
    rows, runnable = [], {}
    for name, fn in fns.items():
        try:
            out = fn(q, k, v)
            err = float((out.float() - truth).abs().max() / truth.abs().max())
            # the CPU's speed right before and after this contender's host timing: a VM's
            # switches between about 45 and 85 ns per step, and a host figure follows it
            speed = [cpu_speed.loop_ns()]
            host_us = timing.host_ms_per_call(fn, (q, k, v)) * 1e3
            speed.append(cpu_speed.loop_ns())
        except Exception as exc:  # noqa: BLE001 (a contender that cannot run this shape)
            rows.append({"shape": shape, "name": name, "error": f"{type(exc).__name__}: {exc}"})
            continue
        runnable[name] = fn
        rows.append(
            {"shape": shape, "name": name, "host_us": host_us, "rel_err_vs_cudnn": err,
             "cpu_loop_ns": speed}
        )  # fmt: skip
    # the contenders take turns, `rounds` times: a clock that drifts over the minute (heat,
    # power) then moves every contender alike instead of favouring whichever ran first
    per_round = {name: [] for name in runnable}
    for _ in range(rounds):
        for name, fn in list(runnable.items()):
            try:
                per_round[name].append(timing.bench(fn, (q, k, v), "cuda")["median_ms"])
            except Exception as exc:  # noqa: BLE001 (out of memory while timing: this one only)
                del runnable[name], per_round[name]
                row = next(r for r in rows if r["name"] == name)
                row["error"] = f"{type(exc).__name__} while timing: {exc}"
    for r in rows:
        if r["name"] in per_round:
            times = sorted(per_round[r["name"]])
            r["ms"] = times[len(times) // 2]
            r["ms_rounds"] = per_round[r["name"]]
            r["tflops"] = flops / (r["ms"] * 1e-3) / 1e12
    from compilekit.variants import (
        triton_flash as tf,  # the config eager autotuning chose (compiled's)
    )

    named = {"Q": q, "S_BUCKET": 1 << (dims.seq - 1).bit_length()}
    consts = dict(HEAD_DIM=dims.head_dim, CAUSAL=True, WINDOW=0, TMA_OK=tf.tma_ok(q, k, v))
    tuned = tf._TUNED.get(tf.tuning_key(named, consts))
    for r in rows:
        if r["name"].startswith("triton-flash") and tuned is not None:
            r["config"] = str(tuned)
    cudnn = next((r["ms"] for r in rows if r["name"] == "cuDNN SDPA eager" and "ms" in r), None)
    flex = next((r["ms"] for r in rows if r["name"] == "flex compiled" and "ms" in r), None)
    for r in rows:
        if "ms" in r:
            r["vs_cudnn"] = cudnn / r["ms"] if cudnn else None
            r["vs_flex"] = flex / r["ms"] if flex else None
    return rows


def _spread(times: list[float]) -> str:
    return f"{min(times):.4f}-{max(times):.4f}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", default=SHAPES)
    parser.add_argument("--baseline", help="another copy of variants/triton_flash.py")
    parser.add_argument("--gluon-baseline", help="another copy of variants/gluon_flash.py")
    parser.add_argument("--gluon-tiles", default="", help="gluon-flash tiles to time as well")
    parser.add_argument("--json", help="also write the rows here")
    parser.add_argument(
        "--l2-max-rows", type=int,
        help="launch.L2_GROUP_MAX_ROWS for both kernels in this process (0: no cap), to time "
        "a grouping against another in two processes",
    )  # fmt: skip
    parser.add_argument("--rounds", type=int, default=3, help="turns each contender takes")
    parser.add_argument(
        "--reduce-overhead", action="store_true",
        help="both kernels under reduce-overhead too, their inputs static (no copies)",
    )  # fmt: skip
    parser.add_argument(
        "--eager-only", action="store_true",
        help="no torch.compile rows (no flex): tiles and kernels eagerly, beside cuDNN, quickly",
    )  # fmt: skip
    args = parser.parse_args(argv)
    if args.eager_only and args.reduce_overhead:
        print("triton_flash_bench: --eager-only leaves out --reduce-overhead's rows: give one",
              file=sys.stderr)  # fmt: skip
        return 2
    if args.rounds < 1:
        print(f"triton_flash_bench: --rounds {args.rounds}: give 1 or more", file=sys.stderr)
        return 2
    from compilekit.variants import launch

    if args.l2_max_rows is not None:
        if args.l2_max_rows < 0:
            print(f"triton_flash_bench: --l2-max-rows {args.l2_max_rows}: give 0 (no cap) or "
                  "more", file=sys.stderr)  # fmt: skip
            return 2
        launch.L2_GROUP_MAX_ROWS = args.l2_max_rows  # read at each first launch of a shape
    try:
        tiles = gluon_tiles(args.gluon_tiles)
    except ValueError as exc:
        print(f"triton_flash_bench: {exc}", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("triton_flash_bench needs a CUDA GPU", file=sys.stderr)
        return 2
    rows = []
    print(
        f"{torch.cuda.get_device_name()}, torch {torch.__version__}, bf16, causal, "
        f"L2 groups of at most {launch.L2_GROUP_MAX_ROWS or 'any number of'} rows"
    )
    print(
        f"{'shape':16} {'contender':24} {'ms':>8} {'TFLOP/s':>8} {'host µs':>8} "
        f"{'CPU ns':>7} {'x cuDNN':>8} {'x flex':>7} {'err':>8}  turns (ms)"
    )
    for shape in args.shapes.split(","):
        # fresh compiles per shape, as a user compiling for one shape gets them (one wrapper
        # over all shapes would go dynamic, then hit the recompile limit)
        torch._dynamo.reset()
        shape_rows = bench_shape(
            shape,
            contenders(
                args.baseline, args.gluon_baseline, tiles, args.reduce_overhead, args.eager_only
            ),
            args.rounds,
        )
        for r in shape_rows:
            rows.append(r)
            if "error" in r:
                print(f"{shape:16} {r['name']:24} {r['error'][:80]}")
                continue
            print(
                f"{shape:16} {r['name']:24} {r['ms']:8.4f} {r['tflops']:8.1f} "
                f"{r['host_us']:8.1f} {cpu_speed.speed_span(r['cpu_loop_ns']):>7} "
                f"{r['vs_cudnn'] or 0:8.2f} {r['vs_flex'] or 0:7.2f} "
                f"{r['rel_err_vs_cudnn']:8.1e}  {_spread(r['ms_rounds'])}  {r.get('config', '')}",
                flush=True,
            )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
