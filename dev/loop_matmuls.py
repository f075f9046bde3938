"""Each one-row matmul of a Llama decode cell's step, from its kernel map: which projection a
kernel reads (by its source line in transformers' modeling_llama.py, and for the MLP's line by
what it fused: the SiLU-times-up product goes into down's reduction, so a kernel that fused
`silu` reads down's weight, the other gate's and up's), its time per call, the weight bytes it
reads and the share of the cell's copy ceiling that makes. The kernel map has no bytes for these
kernels where their call in the output code could not be sized, so the weights' bytes come from
the model's dimensions (Llama-2-7B's by default). Inductor names a kernel after every node
fused into it, so a norm's variance or the rotary kernel can carry `mm` and a projection's line:
a kernel that took less than half the time its projection's weight takes at the copy ceiling
(a read twice as fast as a copy) cannot have read that weight, and is left out.

    python3 dev/loop_matmuls.py RUN_DIR [RUN_DIR ...] [--hidden 4096 --intermediate 11008
        --kv-heads 32 --heads 32 --vocab 32000]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import sys

LINES = {  # what modeling_llama.py's line reads, by the code on it
    "self.q_proj(": "qkv",
    "self.o_proj(": "o",
    "self.down_proj(": "mlp",
    "self.lm_head(": "lm_head",
}


def read(run_dir: str, name: str):
    path = os.path.join(run_dir, name)
    opener = gzip.open if os.path.exists(path + ".gz") else open
    with opener(path + ".gz" if os.path.exists(path + ".gz") else path, "rt") as f:
        return json.load(f)


def weight_bytes(args) -> dict[str, int]:
    """Bytes (bf16) each projection's weight holds."""
    head = args.hidden // args.heads
    return {
        "qkv": (args.hidden + 2 * args.kv_heads * head) * args.hidden * 2,
        "o": args.hidden * args.hidden * 2,
        "gate_up": 2 * args.intermediate * args.hidden * 2,
        "down": args.hidden * args.intermediate * 2,
        "lm_head": args.vocab * args.hidden * 2,
    }


def projection(kernel: dict) -> str | None:
    """The projection a matmul reduction reads, or None for any other kernel."""
    if "mm" not in kernel["name"].split("_") or not kernel["name"].startswith("triton_red"):
        return None
    for line in kernel.get("source_lines") or []:
        for code, what in LINES.items():
            if code in line.get("code", ""):
                if what == "mlp":
                    return "down" if "silu" in kernel["name"] else "gate_up"
                return what
    return None


def table(run_dir: str, sizes: dict) -> list[dict]:
    result = read(run_dir, "result.json")
    copy = result["decode"]["copy_gbps"]
    rows = []
    for kernel in read(run_dir, "kernels.json")["kernels"]:
        what = projection(kernel)
        if what is None:
            continue
        us = kernel["device_ms"] * 1e3
        ideal = sizes[what] / (copy * 1e9) * 1e6
        if us < ideal / 2:  # too fast to have read the weight: not the matmul
            continue
        calls = kernel["calls_per_forward"]
        rows.append({"projection": what, "kernel": kernel["name"], "calls": calls, "us": us,
                     "ideal_us": ideal, "of_copy": ideal / us,
                     "lost_us_per_token": (us - ideal) * calls})  # fmt: skip
    return sorted(rows, key=lambda row: list(sizes).index(row["projection"]))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+")
    parser.add_argument("--hidden", type=int, default=4096)
    parser.add_argument("--intermediate", type=int, default=11008)
    parser.add_argument("--heads", type=int, default=32)
    parser.add_argument("--kv-heads", type=int, default=32)
    parser.add_argument("--vocab", type=int, default=32000)
    args = parser.parse_args(argv)
    sizes = weight_bytes(args)
    for run_dir in args.runs:
        try:
            rows = table(run_dir, sizes)
        except (OSError, KeyError, TypeError) as exc:
            print(f"loop_matmuls: {run_dir}: not a decode cell's run ({exc})", file=sys.stderr)
            return 2
        print(os.path.basename(run_dir.rstrip("/")))
        for row in rows:
            print(f"  {row['projection']:8} {row['calls']:4.0f} x {row['us']:6.2f} us "
                  f"(at the copy ceiling {row['ideal_us']:5.2f}): {row['of_copy']:5.1%}, "
                  f"{row['lost_us_per_token']:6.1f} us a token beyond it  "
                  f"{row['kernel'][:60]}")  # fmt: skip
        lost = sum(row["lost_us_per_token"] for row in rows)
        print(f"  the matmuls' time beyond the copy ceiling: {lost / 1e3:.3f} ms a token")
    return 0


if __name__ == "__main__":
    sys.exit(main())
