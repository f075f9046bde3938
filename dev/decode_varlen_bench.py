"""triton-flash at decode shapes and the varlen kernels (triton-flash-varlen, gluon-flash-varlen)
on ragged batches, against the other paths, back to back in one process: a quick look before a
sweep (the sweep's cells are what get published).

Each row: a variant (eagerly, or `name:compiled` under torch.compile default;
`gluon-flash-varlen:work-order` deals its tiles in its other order) at a shape, the
median of --repeats triton.testing.do_bench medians in ms (and their range), effective TFLOP/s
(the variant's own FLOPs: real lengths for varlen), and its max relative error against the
float64 reference with --check.
A path that refuses the shape or fails is its row's error.

Usage (GPU): python dev/decode_varlen_bench.py [--decode "SHAPE;SHAPE"] [--varlen "SHAPE;SHAPE"]
             [--check] [--repeats 3] [--json out.json]
"""

from __future__ import annotations

import argparse
import json

import torch

from compilekit.compile.variant import load_variant
from compilekit.measure import inputs as inputs_mod
from compilekit.model.spec import Cell, parse_shape

DECODE_SHAPES = "1x32g8x1x8192x128;1x32g8x1x32768x128;16x32g8x1x8192x128;16x32g8x1x32768x128"
DECODE_PATHS = "sdpa,sdpa-flash,sdpa-efficient,sdpa-cudnn,flex:compiled,triton-flash"
VARLEN_SHAPES = "lognormal512@65536x32g8x128;lognormal2048@65536x32g8x128"
VARLEN_PATHS = (
    "sdpa-padded,sdpa-jagged,varlen-attn,flex-document:compiled,triton-flash-varlen,"
    "gluon-flash-varlen,gluon-flash-varlen:work-order"
)


# gluon-flash-varlen's tile orders (its ORDER) as paths: `gluon-flash-varlen:work-order`
ORDERS = {"work-order": "work"}


def row(spec: str, shape_text: str, check: bool, device: str, repeats: int = 1) -> dict:
    name, _, how = spec.partition(":")
    if how in ORDERS:
        from compilekit.variants import gluon_flash_varlen

        kept, gluon_flash_varlen.ORDER = gluon_flash_varlen.ORDER, ORDERS[how]
        try:
            return {**row(name, shape_text, check, device, repeats), "order": ORDERS[how]}
        finally:
            gluon_flash_varlen.ORDER = kept
    out = {"variant": name, "compiled": how == "compiled", "shape": shape_text}
    try:
        variant = load_variant(name)
        dtype = "bfloat16" if device == "cuda" else "float32"
        cell = Cell(name, "eager", parse_shape(shape_text), dtype, device)
        args = inputs_mod.cell_inputs(variant, cell)
        fn = torch.compile(variant.attention) if how == "compiled" else variant.attention
        result = fn(*args)
        # at decode shapes one do_bench moves by 10% from run to run: the median of several,
        # and their spread
        runs = sorted(bench(lambda: fn(*args), device) for _ in range(repeats))
        out["ms"] = runs[len(runs) // 2]
        out["ms_range"] = [runs[0], runs[-1]]
        flops = variant.flops(cell.shape) if variant.flops else None
        if flops:
            out["tflops"] = flops / out["ms"] / 1e9
        if check:
            ref, _ = inputs_mod.reference_output(variant, *args)
            got = inputs_mod.checkable(variant, result)
            out["max_rel_err"] = inputs_mod.max_rel_err(got, ref)
    except Exception as exc:  # a refusal or a failure is this row's figure
        out["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
    if device == "cuda":
        torch.cuda.empty_cache()
    return out


def bench(call, device: str) -> float:
    """do_bench's median on a GPU; one call's wall time elsewhere (a smoke run of this script)."""
    if device == "cuda":
        import triton.testing

        return triton.testing.do_bench(call, warmup=50, rep=300)
    import time

    start = time.perf_counter()
    call()
    return (time.perf_counter() - start) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--decode", default=DECODE_SHAPES)
    parser.add_argument("--decode-paths", default=DECODE_PATHS)
    parser.add_argument("--varlen", default=VARLEN_SHAPES)
    parser.add_argument("--varlen-paths", default=VARLEN_PATHS)
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--repeats", type=int, default=3, help="do_bench runs per row (median)")
    parser.add_argument("--json")
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args()
    rows = []
    for shapes, paths in ((args.decode, args.decode_paths), (args.varlen, args.varlen_paths)):
        for shape in filter(None, shapes.split(";")):  # a listed varlen shape has commas
            for spec in paths.split(","):
                rows.append(row(spec, shape, args.check, args.device, args.repeats))
                r = rows[-1]
                figures = r.get("error") or (
                    f"{r['ms']:.4f} ms ({r['ms_range'][0]:.4f}-{r['ms_range'][1]:.4f})  "
                    f"{r.get('tflops', 0):.1f} TFLOP/s  "
                    f"err {r.get('max_rel_err', float('nan')):.2e}"
                )
                print(f"{shape:32} {spec:28} {figures}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
