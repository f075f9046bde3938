"""Decode attention over a batch whose rows hold caches of different lengths, as a serving
engine's batch does: triton-flash reading each row's own keys (kv_lens) beside the padded
alternatives, back to back in one process, each checked against float64.

A shape is BxHgKxLxD: B rows, H query heads over K KV heads, a cache of L slots, head size D.
Row b holds lens[b] keys, drawn uniformly in [L/8, L] from --seed (the longest row is L).
Its one query is the last of its keys. Paths:
- `triton-flash:lens`: the split-KV kernel with per-row lengths; it reads each row's keys only;
- `sdpa:mask` (and `sdpa-efficient:mask`, `sdpa-cudnn:mask`): SDPA over the padded cache with a
  boolean mask that hides each row's empty slots; it reads every slot;
- `flex:lens`: compiled FlexAttention with a mask_mod on the lengths (its block mask skips
  the empty blocks);
- `triton-flash:padded`: the kernel over the whole cache of every row, the cost of ignoring
  the lengths (its output is not the answer: no error is shown for it).
Bandwidth is the K/V bytes the rows hold (sum of lens) over the time.

Usage (GPU): python dev/ragged_decode_bench.py [--shapes "16x32g8x8192x128;..."] [--check]
             [--repeats 3] [--json out.json]
On the CPU: TRITON_INTERPRET=1 python dev/ragged_decode_bench.py --device cpu --shapes
"2x4g2x96x16" --paths triton-flash:lens,sdpa:mask --check  (a smoke run: times mean nothing)
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from compilekit.measure.inputs import max_rel_err  # noqa: E402
from dev.decode_varlen_bench import bench  # noqa: E402

SHAPES = "1x32g8x8192x128;16x32g8x8192x128;16x32g8x32768x128;64x32g8x8192x128"
PATHS = (
    "triton-flash:lens,triton-flash:padded,sdpa:mask,sdpa-efficient:mask,sdpa-cudnn:mask,flex:lens"
)
BACKENDS = {"sdpa": None, "sdpa-efficient": "EFFICIENT_ATTENTION", "sdpa-cudnn": "CUDNN_ATTENTION"}


def parse(text: str) -> tuple[int, int, int, int, int]:
    """'16x32g8x8192x128' -> (B, H, K, L, D)."""
    b, heads, length, d = text.split("x")
    h, _, k = heads.partition("g")
    return int(b), int(h), int(k or h), int(length), int(d)


def make(shape: str, device: str, dtype, seed: int):
    """(q [B, H, 1, D], k and v [B, K, L, D] with NaN in every empty slot, lens int32 [B])."""
    b, h, kv, length, d = parse(shape)
    gen = torch.Generator().manual_seed(seed)
    lens = torch.randint(max(1, length // 8), length + 1, (b,), generator=gen, dtype=torch.int32)
    lens[0] = length  # the longest row fills the cache: the padded paths' length
    q = torch.randn(b, h, 1, d, generator=gen).to(device, dtype)
    k, v = (torch.randn(b, kv, length, d, generator=gen) for _ in range(2))
    empty = torch.arange(length)[None, :] >= lens[:, None]  # [B, L]
    # an empty slot a path reads spreads NaN into its row: the check catches it
    k[empty[:, None, :, None].expand_as(k)] = float("nan")
    v[empty[:, None, :, None].expand_as(v)] = float("nan")
    return q, k.to(device, dtype), v.to(device, dtype), lens.to(device)


def reference(q, k, v, lens) -> torch.Tensor:
    """float64 attention of each row's query over its own first lens[b] keys."""
    group = q.shape[1] // k.shape[1]
    out = torch.empty(q.shape, dtype=torch.float64)
    for b, n in enumerate(lens.tolist()):
        kb = k[b, :, :n].double().cpu().repeat_interleave(group, 0)
        vb = v[b, :, :n].double().cpu().repeat_interleave(group, 0)
        scores = q[b].double().cpu() @ kb.transpose(-1, -2) / q.shape[-1] ** 0.5
        out[b] = scores.softmax(-1) @ vb
    return out


def path(spec: str, q, k, v, lens):
    """The callable of one path: (call, whether its output is the answer)."""
    from compilekit.variants import triton_flash

    name, _, how = spec.partition(":")
    if spec == "triton-flash:lens":
        return (lambda: triton_flash.cached_attention(q, k, v, lens)), True
    if spec == "triton-flash:padded":
        filled = torch.nan_to_num(k), torch.nan_to_num(v)  # the same bytes, no NaN
        return (lambda: triton_flash.flash_attention(q, *filled, causal=True)), False
    length = k.shape[2]
    keep = torch.arange(length, device=q.device)[None, :] < lens[:, None]  # [B, L]
    if name in BACKENDS and how == "mask":
        from torch.nn.attention import SDPBackend, sdpa_kernel
        from torch.nn.functional import scaled_dot_product_attention as sdpa

        # a masked slot's NaN would still reach the output through 0 * NaN: zero the empty
        # slots, as a serving engine's allocator leaves them
        kz, vz = torch.nan_to_num(k), torch.nan_to_num(v)
        mask = keep[:, None, None, :]
        pick = BACKENDS[name]

        def call():
            if pick is None:
                return sdpa(q, kz, vz, attn_mask=mask, enable_gqa=True)
            with sdpa_kernel(getattr(SDPBackend, pick)):
                return sdpa(q, kz, vz, attn_mask=mask, enable_gqa=True)

        return call, True
    if spec == "flex:lens":
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention

        kz, vz = torch.nan_to_num(k), torch.nan_to_num(v)
        block = create_block_mask(
            lambda b, h, qi, ki: ki < lens[b], q.shape[0], None, 1, length, device=q.device
        )
        compiled = torch.compile(flex_attention)
        return (lambda: compiled(q, kz, vz, block_mask=block, enable_gqa=True)), True
    raise SystemExit(f"unknown path {spec!r}: choose from {PATHS}")


def row(spec: str, shape: str, device: str, check: bool, repeats: int, seed: int) -> dict:
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    out = {"path": spec, "shape": shape}
    try:
        q, k, v, lens = make(shape, device, dtype, seed)
        call, answers = path(spec, q, k, v, lens)
        result = call()
        runs = sorted(bench(call, device) for _ in range(repeats))
        out["ms"], out["ms_range"] = runs[len(runs) // 2], [runs[0], runs[-1]]
        held = int(lens.sum()) * k.shape[1] * k.shape[-1] * 2 * k.element_size()
        out["kv_bytes"] = held
        out["gbps"] = held / (out["ms"] * 1e-3) / 1e9
        out["lens"] = lens.tolist()
        if check and answers:
            out["max_rel_err"] = max_rel_err(result.cpu(), reference(q, k, v, lens))
    except Exception as exc:  # a refusal or a failure is this row's figure
        out["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", default=SHAPES)
    parser.add_argument("--paths", default=PATHS)
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--repeats", type=int, default=3, help="do_bench runs per row (median)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--json")
    args = parser.parse_args()
    rows = []
    for shape in filter(None, args.shapes.split(";")):
        for spec in args.paths.split(","):
            r = row(spec, shape, args.device, args.check, args.repeats, args.seed)
            rows.append(r)
            figures = r.get("error") or (
                f"{r['ms']:.4f} ms ({r['ms_range'][0]:.4f}-{r['ms_range'][1]:.4f})  "
                f"{r['gbps']:.0f} GB/s of held K/V  err {r.get('max_rel_err', float('nan')):.2e}"
            )
            print(f"{shape:22} {spec:22} {figures}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
