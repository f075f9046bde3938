"""The kernel sweep's judged shapes in three tables. First cuDNN's time over each path's (above
1.00: faster than cuDNN), eagerly and compiled, each with its TFLOP/s. Then each kernel's
compiled time over its eager time, under default, reduce-overhead and reduce-overhead with the
inputs static (the `static` config: no copies before each replay). Then, for the two kernels
under reduce-overhead, where the time goes: the CUDA graph's own GPU work against eager's
kernel (both from the profiler's kernel times, as each cell's kernel map records them) and the
input copies cudagraph trees make before each replay. `python3 dev/kernel_table.py
SWEEP_DIR` (a published folder such as experiments/results/h200/kernel, or a sweep's own)."""

import gzip
import json
import os
import sys

JUDGED = ["8x16x1024x64", "16x16x512x64", "2x32x4096x128", "1x32x8192x128", "3x24x3072x128",
          "2x8x6000x64"]  # fmt: skip
# the -gqa variants, 4 query heads per K/V head: K/V made at 8 heads, then K/V made at 32 and
# every fourth head taken in the timed call (variants.masks.shared_kv: a copy both paths make)
GQA = {"1x32g8x4096x128": " GQA 32/8", "1x32x4096x128": " GQA 32/8, K/V sliced per call"}
MODES = ("eager", "default", "reduce-overhead")
PATHS = [("sdpa-flash", "eager"), ("flex", "default")] + [
    (v, m) for v in ("triton-flash", "gluon-flash") for m in MODES
]


def label(shape: str, suffix: str) -> str:
    """The row's name: its shape, and for a GQA row how its K/V heads were made."""
    return shape + (GQA[shape] if suffix else "")


def record(folder: str, variant: str, mode: str, shape: str, config: str = "") -> dict | None:
    """The cell's result.json (under the experiment's config of that name, if one), None
    where it is missing or not ok."""
    label = f"{variant}__{mode}__{shape}__bfloat16__cuda" + (f"__cfg-{config}" if config else "")
    base = os.path.join(folder, label, "result.json")
    for path, opener in ((base + ".gz", gzip.open), (base, open)):
        if os.path.isfile(path):
            with opener(path, "rt") as f:
                found = json.load(f)
            return found if found["status"] == "ok" else None
    return None


def timed(folder: str, variant: str, mode: str, shape: str, config: str = "") -> tuple | None:
    """The cell's (compiled_ms, its mode's median; tflops at that time), None where it is
    missing or not ok."""
    found = record(folder, variant, mode, shape, config)
    return (found["compiled_ms"], found.get("tflops")) if found else None


COMPILED = [("default", ""), ("reduce-overhead", ""), ("reduce-overhead", "static")]


def compiled_table(folder: str, rows: list) -> None:
    """Each kernel's compiled median over its eager median, per shape and compiled path."""
    names = ["default", "reduce-overhead", "reduce-overhead, inputs static"]
    print("\n| shape | kernel | eager ms | " + " | ".join(names) + " |")
    print("|---" * (3 + len(names)) + "|")
    for shape, suffix, _ in rows:
        for kernel in ("triton-flash", "gluon-flash"):
            eager = timed(folder, kernel + suffix, "eager", shape)
            if not eager:
                continue
            cells = []
            for mode, config in COMPILED:
                cell = timed(folder, kernel + suffix, mode, shape, config)
                cells.append(f"{cell[0] / eager[0]:.2f}" if cell else "-")
            print(
                f"| {label(shape, suffix)} | {kernel} | {eager[0]:.4f} | "
                + " | ".join(cells)
                + " |"
            )


def replay_table(folder: str, rows: list) -> None:
    """reduce-overhead's time taken apart, per kernel and shape: the graph's GPU work, eager's
    kernel time, their ratio, and the input copies outside the graph (all profiler figures)."""
    print("\n| shape | kernel | eager kernel ms | graph ms | graph / eager | input copies ms |")
    print("|---|---|---|---|---|---|")
    for shape, suffix, _ in rows:
        for kernel in ("triton-flash", "gluon-flash"):
            eager = record(folder, kernel + suffix, "eager", shape)
            graph = record(folder, kernel + suffix, "reduce-overhead", shape)
            replay = (graph or {}).get("replay") or {}
            eager_ms = (eager or {}).get("profiled_forward_device_ms")
            if not eager_ms or replay.get("graph_gpu_ms") is None:
                continue
            print(
                f"| {label(shape, suffix)} | {kernel} | {eager_ms:.4f} | "
                f"{replay['graph_gpu_ms']:.4f} | {replay['graph_gpu_ms'] / eager_ms:.2f} | "
                f"{replay['input_copy_ms']:.4f} |"
            )


def main(folder: str) -> None:
    print("| shape | cuDNN ms (TFLOP/s) | " + " | ".join(f"{v} {m}" for v, m in PATHS) + " |")
    print("|---" * (2 + len(PATHS)) + "|")
    rows = [(s, "", "sdpa-cudnn") for s in JUDGED] + [(s, "-gqa", "sdpa-gqa") for s in GQA]
    rows = [row for row in rows if record(folder, row[2], "eager", row[0])]  # measured ones
    for shape, suffix, base in rows:
        cudnn = timed(folder, base, "eager", shape)
        cells = []
        for variant, mode in PATHS:
            name = variant + suffix if variant.endswith("flash") or variant == "flex" else variant
            cell = timed(folder, name, mode, shape)
            cells.append(f"{cudnn[0] / cell[0]:.2f}{_tflops(cell)}" if cell and cudnn else "-")
        first = f"{cudnn[0]:.4f}{_tflops(cudnn)}" if cudnn else "-"
        print(f"| {label(shape, suffix)} | {first} | " + " | ".join(cells) + " |")
    compiled_table(folder, rows)
    replay_table(folder, rows)


def _tflops(cell: tuple) -> str:
    return f" ({cell[1]:.0f})" if cell[1] else ""


if __name__ == "__main__":
    if len(sys.argv) != 2 or not os.path.isdir(sys.argv[1]):
        print("usage: python3 dev/kernel_table.py SWEEP_DIR (a folder of cells)", file=sys.stderr)
        sys.exit(2)
    main(sys.argv[1])
