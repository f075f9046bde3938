"""What differs when a compiled BERT-base is called inside torch.no_grad() or
torch.inference_mode() (GPU; issue 76's grad-mode question).

Each case runs in a fresh process: BERT-base (BertConfig defaults, random weights, bf16,
8x128 by default) built as compilekit builds it (eval(), requires_grad_(False)), or as a user
who never freezes it (eval() alone), then eager, default and reduce-overhead, each timed as
the issue timed it (median of five back-to-back loops of 100 calls, wall time, synchronized
at each loop's end). Beside each time: Dynamo's recompiles and graphs, the CUDA-graph skips and
the inputs a replay copies (Inductor's counters), and the kernels and device time of one
profiled call (after the timed loops). Case "switch" compiles under no context and then
calls the same compiled model inside inference_mode (a user who warms up outside the mode).
The recompile reasons torch logs (TORCH_LOGS=recompiles) are kept per case.

Usage (GPU): python3 dev/grad_mode_look.py [--shape 8x128] [--cases off,switch] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

CASES = {  # name: (frozen, the context of every call, the context of the warm-up calls)
    "off": (True, "off", "off"),
    "no-grad": (True, "no-grad", "no-grad"),
    "inference": (True, "inference", "inference"),
    "switch": (True, "inference", "off"),
    "unfrozen-off": (False, "off", "off"),
    "unfrozen-inference": (False, "inference", "inference"),
}
MODES = ("eager", "default", "reduce-overhead")


def _context(name: str):
    import contextlib

    import torch

    return {
        "off": contextlib.nullcontext,
        "no-grad": torch.no_grad,
        "inference": torch.inference_mode,
    }[name]()


def _loops_ms(fn, loops: int = 5, calls: int = 100) -> list[float]:
    import torch

    out = []
    for _ in range(loops):
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
        out.append((time.perf_counter() - start) / calls * 1e3)
    return out


def _one_call_profile(fn) -> dict:
    import torch
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    return {
        "kernels": len(kernels),
        "device_ms": round(sum(e.device_time for e in kernels) / 1e3, 4),
    }


def run_case(name: str, shape: str) -> dict:
    """One case's modes in this process."""
    import torch
    from torch._dynamo.utils import counters
    from transformers import BertConfig, BertModel

    frozen, call_ctx, warm_ctx = CASES[name]
    batch, seq = (int(x) for x in shape.split("x"))
    torch.manual_seed(0)
    cfg = BertConfig()
    cfg._attn_implementation = "sdpa"
    model = BertModel(cfg, add_pooling_layer=False).to("cuda", torch.bfloat16).eval()
    if frozen:
        model.requires_grad_(False)
    ids = torch.randint(0, cfg.vocab_size, (batch, seq), device="cuda")
    mask = torch.ones(batch, seq, dtype=torch.long, device="cuda")
    rows = {}
    for mode in MODES:
        torch._dynamo.reset()
        counters.clear()
        target = model if mode == "eager" else torch.compile(model, mode=mode)

        def call(target=target):
            return target(input_ids=ids, attention_mask=mask).last_hidden_state

        start = time.perf_counter()
        with _context(warm_ctx):
            for _ in range(3):
                call()
            torch.cuda.synchronize()
        first_s = time.perf_counter() - start
        with _context(call_ctx):
            for _ in range(5):  # the switch case's recompile and recapture, before timing
                out = call()
            torch.cuda.synchronize()
            loops = _loops_ms(call)
            prof = _one_call_profile(call)
        inductor = counters["inductor"]
        rows[mode] = {
            "median_ms": round(statistics.median(loops), 4),
            "loops_ms": [round(x, 4) for x in loops],
            "warmup_s": round(first_s, 1),
            "graphs": counters["stats"].get("unique_graphs", 0),
            "frames_ok": counters["frames"].get("ok", 0),
            "cudagraph_skips": inductor.get("cudagraph_skips", 0),
            "non_static_inputs": inductor.get("cudagraph_recorded_non_static_inputs", 0),
            "out_inference_tensor": out.is_inference(),
            "out_requires_grad": out.requires_grad,
            **prof,
        }
        print(name, mode, json.dumps(rows[mode]), flush=True)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", default="8x128")
    parser.add_argument("--json")
    parser.add_argument("--cases", default=",".join(CASES), help="a comma list of CASES")
    parser.add_argument("--case", help=argparse.SUPPRESS)  # the child's one case
    args = parser.parse_args()
    if args.case:
        print("RESULT " + json.dumps(run_case(args.case, args.shape)))
        return 0
    found = {}
    env = dict(os.environ, TORCH_LOGS="recompiles")
    for name in args.cases.split(","):
        proc = subprocess.run(
            [sys.executable, __file__, "--case", name, "--shape", args.shape],
            capture_output=True, text=True, env=env, timeout=600,
        )
        lines = proc.stdout.splitlines()
        result = next((json.loads(x[7:]) for x in lines if x.startswith("RESULT ")), None)
        reasons = [x for x in proc.stderr.splitlines() if "Recompiling" in x or "triggered by" in x
                   or "- " in x and "guard" in x.lower()]
        found[name] = {"rows": result, "recompile_log": reasons[:20],
                       "error": None if result else proc.stderr[-2000:]}
        print(f"== {name}", flush=True)
        for mode, row in (result or {}).items():
            print(f"  {mode:16s} {row['median_ms']:8.3f} ms  graphs {row['graphs']}  "
                  f"skips {row['cudagraph_skips']}  copies {row['non_static_inputs']}  "
                  f"kernels {row['kernels']}  device {row['device_ms']} ms", flush=True)
        for line in reasons[:6]:
            print("   ", line[:300])
        if not result:
            print(proc.stderr[-1500:])
    if args.json:
        with open(args.json, "w") as f:
            json.dump(found, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
