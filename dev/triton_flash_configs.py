"""Which of triton-flash's autotune configs wins at a shape, and by how much, beside cuDNN.

For each shape (bf16, causal): cuDNN SDPA's time, triton-flash's (its autotuned pick), the time
the autotuner measured for every config it tried (its own configs plus --extra ones, pruned as
usual), and with --baseline an older copy of variants/triton_flash.py, for a before/after of a
kernel change. Times: triton.testing.do_bench medians through
compilekit.measure.timing (L2 flushed), after the autotuned first call.

Usage (GPU): python3 dev/triton_flash_configs.py [--shapes 1x32x8192x128,...]
             [--extra 128x64x4x4,...] [--baseline old_triton_flash.py]
`--extra` configs are BLOCK_MxBLOCK_Nxnum_warpsxnum_stages, with `xtma` appended for one that
loads K and V through TMA tensor descriptors (the kernel's TMA configs; pruned where TMA cannot
read the inputs).
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402

from compilekit.measure import timing  # noqa: E402
from compilekit.model.errors import UserError  # noqa: E402
from compilekit.model.spec import parse_shape  # noqa: E402
from compilekit.variants.masks import causal_flops  # noqa: E402

SHAPES = "1x32x8192x128,8x16x1024x64,4x16x4096x128"
EXTRA = "128x64x8x4,128x64x8x4xtma,128x128x4x3xtma,128x64x4x3xtma,128x32x4x4xtma,64x32x4x2xtma"


def _configs(text: str):
    import triton

    out = []
    for item in filter(None, text.split(",")):
        fields = item.split("x")
        tma = fields[-1] == "tma"
        try:
            m, n, warps, stages = map(int, fields[:4] if tma else fields)
        except ValueError:
            print(
                f"triton_flash_configs: --extra {item!r} is not BLOCK_MxBLOCK_Nxwarpsxstages"
                "[xtma] (e.g. 128x64x4x3 or 128x64x8x3xtma)",
                file=sys.stderr,
            )
            sys.exit(2)
        out.append(
            triton.Config(
                {"BLOCK_M": m, "BLOCK_N": n, "TMA": tma}, num_warps=warps, num_stages=stages
            )
        )
    return out


def _timings(kernel) -> list[tuple[float, str]]:
    """(ms, config) for every config the autotuner timed in its last tuning, fastest first."""
    found = getattr(kernel, "configs_timings", None) or {}
    rows = [(t[0] if isinstance(t, (list, tuple)) else float(t), str(c)) for c, t in found.items()]
    return sorted(rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", default=SHAPES)
    parser.add_argument("--extra", default=EXTRA, help="more configs to try ('' for none)")
    parser.add_argument("--baseline", help="an older copy of variants/triton_flash.py")
    args = parser.parse_args()
    extra = _configs(args.extra)  # bad input is one line before anything runs
    try:
        shapes = [(text, parse_shape(text)) for text in args.shapes.split(",")]
    except UserError as exc:
        print(f"triton_flash_configs: {exc}", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("triton_flash_configs: needs a CUDA GPU", file=sys.stderr)
        return 2
    from compilekit.variants import triton_flash as flash

    flash._attn_fwd.configs = flash._attn_fwd.configs + extra
    contenders = {"triton-flash": flash.attention}
    if args.baseline:
        from triton_flash_bench import baseline_module  # (this script's folder is on the path)

        contenders["baseline"] = baseline_module(args.baseline).attention

    def cudnn(q, k, v):
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)

    for shape, dims in shapes:
        q, k, v = (
            torch.randn(
                (dims.batch, dims.heads, dims.seq, dims.head_dim),
                device="cuda",
                dtype=torch.bfloat16,
            )
            for _ in range(3)
        )
        truth = cudnn(q, k, v).float()
        base_ms = timing.bench(cudnn, (q, k, v), "cuda")["median_ms"]
        tflops = causal_flops(dims) / 1e9
        print(f"{shape}: cuDNN {base_ms:.4f} ms ({tflops / base_ms:.0f} TFLOP/s)", flush=True)
        for name, fn in contenders.items():
            err = float((fn(q, k, v).float() - truth).abs().max() / truth.abs().max())
            ms = timing.bench(fn, (q, k, v), "cuda")["median_ms"]
            print(
                f"  {name}: {ms:.4f} ms ({tflops / ms:.0f} TFLOP/s, {base_ms / ms:.2f}x cuDNN, "
                f"max rel err vs cuDNN {err:.1e})",
                flush=True,
            )
        for ms, config in _timings(flash._attn_fwd):
            print(f"    {ms:.4f} ms  {config}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
