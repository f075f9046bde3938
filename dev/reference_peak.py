"""Peak host memory and time of a model forward's float64 reference (workload.reference_output)
on the CPU: Llama-2-7B's widths with 2 of its 32 layers (0.67 B parameters) in float32, 1x8.
Give it a checkout to import compilekit from, to set two versions side by side (a worktree of
an older commit: `git worktree add /tmp/old <commit>`), each in a fresh process.

Usage: python3 dev/reference_peak.py [CHECKOUT]   (default: this one)
"""

import os
import resource
import sys
import time

ROOT = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(__file__))
sys.path.insert(0, os.path.abspath(ROOT))

import torch  # noqa: E402

from compilekit.measure import workload  # noqa: E402
from compilekit.model.spec import parse_shape  # noqa: E402
from compilekit.variants import llama2_7b  # noqa: E402


def two_layers(shape, dtype, device):
    return llama2_7b.workload(shape, dtype, device, num_hidden_layers=2)


def peak_gib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # Linux: KiB


made = workload.build(two_layers, "2-layer", parse_shape("1x8"), "float32", "cpu", 0)
built = peak_gib()
start = time.perf_counter()
with torch.no_grad():
    _, what = workload.reference_output(made, made.inputs)
print(
    f"{os.path.abspath(ROOT)}: peak RSS {built:.2f} GiB after the build, {peak_gib():.2f} GiB "
    f"after the reference ({time.perf_counter() - start:.1f} s; {what})"
)
