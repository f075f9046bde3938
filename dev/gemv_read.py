"""How fast a batch-1 decode's one-row matmuls read their weights, against a bare read of the
same bytes and the device's copy ceiling: Llama-2-7B's four projection shapes (q, k and v
side by side as Inductor's horizontal fusion reads them; o; gate and up; down).

Per shape, L copies of the weight (so no call finds its weight in L2, as none does in a
decode step, which reads 13 GB a token), called in turn inside one CUDA graph; the graph
replayed after a warm-up, timed with events: the time per call is the replay's over L. Paths:
  read      W.sum(-1): one kernel reading the weight row by row, as a GEMV does
  cublas    F.linear(x, W), eager's GEMV (cuBLAS)
  inductor  x @ W.t() compiled with coordinate_descent_tuning and max_autotune_pointwise,
            the matmul reductions of the decode loop's fastest cell (a Triton reduction)
  fused     the same with what the loop fuses into it (its kernels' names say so): Llama's
            RMSNorm before q, k, v and gate, up (recomputed in the reduction), the residual
            add after o, the MLP's SiLU(gate) times up before down (recomputed in down's
            reduction, once per program)
Each is checked against a float64 x @ W.t() (the read against W.sum in float64).

    python3 dev/gemv_read.py [--copies 16] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys

import torch
from tuned_configs import loaded_modules, tuned_configs

# what the loop fuses into each projection's reduction (Inductor's kernel names in the tuned
# Llama-2-7B step: ..._mean_mm_..._rsqrt_..., ..._add_mm_t_transpose_view, ..._mm_mul_silu_...)
FUSED = {"qkv": "norm", "gate_up": "norm", "o": "residual", "down": "silu"}
SHAPES = {  # name: (output rows, reduced length)
    "qkv": (3 * 4096, 4096),
    "o": (4096, 4096),
    "gate_up": (2 * 11008, 4096),
    "down": (4096, 11008),
}


def graph_time_ms(call, copies: int, replays: int = 20) -> float:
    """Median ms per call over `replays` replays of a graph calling `call(i)` for each copy."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for i in range(copies):  # warm: allocations, autotuning, lazy init outside capture
            call(i)
    torch.cuda.current_stream().wait_stream(stream)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for i in range(copies):
            call(i)
    for _ in range(3):
        graph.replay()
    times = []
    for _ in range(replays):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / copies)
    return statistics.median(times)


def measure(name: str, n: int, k: int, copies: int, copy_gbps: float) -> dict:
    """One shape's row: each path's ms per call, GB/s, share of the copy ceiling, error."""
    weights = [torch.randn(n, k, device="cuda", dtype=torch.bfloat16) / k**0.5]
    weights += [torch.randn_like(weights[0]) for _ in range(copies - 1)]
    x = torch.randn(1, k, device="cuda", dtype=torch.bfloat16)
    torch._dynamo.reset()
    before = {id(module) for module in loaded_modules()}
    options = {"coordinate_descent_tuning": True, "max_autotune_pointwise": True}
    mm = torch.compile(lambda x, w: x @ w.t(), options=options, dynamic=False)
    gain = torch.randn(k, device="cuda", dtype=torch.bfloat16)
    residual = torch.randn(1, n, device="cuda", dtype=torch.bfloat16)

    def normed(x, w):  # transformers' LlamaRMSNorm, then the projection
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6)
        return (gain * h.to(x.dtype)) @ w.t()

    gate_up = torch.randn(1, 2 * k, device="cuda", dtype=torch.bfloat16)

    def activated(x, w):  # LlamaMLP's act_fn(gate) * up, then down
        gate, up = gate_up.chunk(2, dim=-1)
        return (torch.nn.functional.silu(gate) * up) @ w.t()

    forms = {
        "norm": normed,
        "residual": lambda x, w: residual + x @ w.t(),
        "silu": activated,
    }
    fused = torch.compile(forms[FUSED[name]], options=options, dynamic=False)
    paths = {
        "read": lambda i: weights[i].sum(-1),
        "cublas": lambda i: torch.nn.functional.linear(x, weights[i]),
        "inductor": lambda i: mm(x, weights[i]),
        "fused": lambda i: fused(x, weights[i]),
    }
    xd, wd = x.double(), weights[0].double()
    if FUSED[name] == "norm":
        normed_x = gain.double() * xd * torch.rsqrt(xd.pow(2).mean(-1, keepdim=True) + 1e-6)
        fused_ref = normed_x @ wd.t()
    elif FUSED[name] == "silu":
        gate, up = gate_up.double().chunk(2, dim=-1)
        fused_ref = (torch.nn.functional.silu(gate) * up) @ wd.t()
    else:
        fused_ref = residual.double() + xd @ wd.t()
    want = {"read": wd.sum(-1), "mm": xd @ wd.t(), "fused": fused_ref}
    row = {"shape": name, "n": n, "k": k, "mb": n * k * 2 / 1e6}
    for path, call in paths.items():
        ref = want.get(path, want["mm"]).flatten()
        try:
            got = call(0).double().flatten()
            err = float((got - ref).abs().max() / ref.abs().max())
            ms = graph_time_ms(call, copies)
        except Exception as exc:  # one path's failure is its row's, the others go on
            row[path] = {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"}
            continue
        gbps = n * k * 2 / (ms * 1e-3) / 1e9
        row[path] = {"ms": ms, "gbps": gbps, "of_copy": gbps / copy_gbps, "rel_err": err}
    text = "  ".join(
        f"{p} {row[p]['ms'] * 1e3:7.2f} us {row[p]['of_copy']:5.1%} ({row[p]['rel_err']:.1e})"
        if "ms" in row[p]
        else f"{p} {row[p]['error']}"
        for p in paths
    )
    print(f"{name:8} {row['mb']:6.1f} MB  {text}")
    row["tuned"] = tuned_configs(skip=before)
    for kernel, config in row["tuned"].items():
        print(f"         {kernel}: {config}")
    return row


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--copies", type=int, default=16)
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("gemv_read: needs a CUDA GPU", file=sys.stderr)
        return 2
    from compilekit.evidence.envinfo import measure_ceilings

    copy_gbps = measure_ceilings("cuda")["copy_gbps"]
    print(f"{torch.cuda.get_device_name()}: copy ceiling {copy_gbps:,.0f} GB/s")
    rows = [measure(name, n, k, args.copies, copy_gbps) for name, (n, k) in SHAPES.items()]
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "copy_gbps": copy_gbps,
                       "copies": args.copies, "rows": rows}, f, indent=1)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
