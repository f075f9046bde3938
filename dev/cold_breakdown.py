"""Where a cold cell's seconds go outside compilekit: a bare user's process, fresh, that imports
torch, compiles naive attention (the blog shape) and calls it once; with empty Inductor caches
(cold), then again with them filled (warm; once more with the first call under cProfile),
then with the FX cache off (a capture-like recompile). Prints each process's steps and
Dynamo's own compile_times.

python dev/cold_breakdown.py [DEVICE]    (writes nothing; run it where the cache may be emptied)
"""

import json
import os
import subprocess
import sys
import tempfile
import time

CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
import torch
t1 = time.perf_counter()
import torch._inductor.config
t2 = time.perf_counter()
sys.path.insert(0, ".")
from compilekit.variants import naive
dev = sys.argv[1]
cuda = dev == "cuda"
shape = (8, 16, 1024, 64) if cuda else (1, 8, 512, 64)
dtype = torch.bfloat16 if cuda else torch.float32
q, k, v = (torch.randn(shape, device=dev, dtype=dtype) for _ in range(3))
naive.attention(q, k, v)
if dev == "cuda":
    torch.cuda.synchronize()
t3 = time.perf_counter()
f = torch.compile(naive.attention)
if len(sys.argv) > 2:  # where a warm first call's seconds go (cProfile's own cost included)
    import cProfile, pstats
    profiler = cProfile.Profile()
    profiler.enable()
f(q, k, v)
if dev == "cuda":
    torch.cuda.synchronize()
t4 = time.perf_counter()
if len(sys.argv) > 2:
    profiler.disable()
    pstats.Stats(profiler, stream=sys.stderr).sort_stats("cumulative").print_stats(60)
from torch._dynamo.utils import compile_times
print(json.dumps({"import_torch": t1 - t0, "import_inductor": t2 - t1, "inputs_eager": t3 - t2,
                  "first_call": t4 - t3}))
print(compile_times(repr="str", aggregate=True))
"""


def run(label, env, device, profile=False):
    start = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-c", CHILD, device, *(["profile"] if profile else [])],
        env=env, capture_output=True, text=True,
    )
    wall = time.perf_counter() - start
    print(f"== {label}: process wall {wall:.1f} s, rc {out.returncode}")
    print(out.stdout.strip()[-3000:])
    if out.returncode:
        print(out.stderr[-2000:])
    elif profile:
        print(out.stderr[-12000:])


def main():
    device = (
        sys.argv[1] if len(sys.argv) > 1 else ("cuda" if os.path.exists("/dev/nvidia0") else "cpu")
    )
    cache = tempfile.mkdtemp(prefix="cold-breakdown-")
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": cache}
    env.pop("TORCH_TRACE", None)
    run("cold (empty caches)", env, device)
    run("warm (caches filled)", env, device)
    run("warm again, its first call under cProfile", env, device, profile=True)
    run("warm, one compile thread", {**env, "TORCHINDUCTOR_COMPILE_THREADS": "1"}, device)
    run(
        "recompile, FX and AOT caches off",
        {**env, "TORCHINDUCTOR_FX_GRAPH_CACHE": "0", "TORCHINDUCTOR_AUTOGRAD_CACHE": "0"},
        device,
    )
    print(json.dumps({"cache": cache}))


if __name__ == "__main__":
    main()
