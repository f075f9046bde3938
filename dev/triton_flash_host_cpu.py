"""The Python part of triton-flash's eager host cost per call, on any machine (no GPU).

The launcher is stubbed: what is timed is the work done in Python before Triton's launcher is
called on a key already seen (the output's allocation, the launch key, the lookup, the
arguments), which is what the variant's own code adds to a launch. check_inputs is timed apart
(with the interpreter's flag set so that CPU tensors pass its device check): a known key skips
it, a version of the variant that checks on every call pays it too. The GPU figure (a
launch-only loop, dev/triton_flash_bench.py) adds the launcher's and the allocator's own
cost to this.

Usage: python3 dev/triton_flash_host_cpu.py [--calls 20000]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402

from compilekit.variants import triton_flash as tf  # noqa: E402


class _Compiled:  # what Triton's launch returns: a compiled kernel, indexed by its grid
    def run(self, *args):
        raise AssertionError("the runner launches, not run")

    def __getitem__(self, grid):
        return lambda *args: None


class _Kernel:  # the autotuned kernel, stubbed: one config, a compiled kernel that does nothing
    class best_config:  # noqa: N801
        kwargs = {"BLOCK_M": 128, "BLOCK_N": 64, "TMA": False}

    fn = tf._attn_fwd.fn if tf.triton is not None else None

    def __getitem__(self, grid):
        return lambda *args, **kwargs: _Compiled()


def _per_call_us(fn, calls: int) -> float:
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - start) / calls * 1e6)
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20000)
    args = parser.parse_args()
    if tf.triton is None:
        print("triton_flash_host_cpu: needs triton (pip install triton numpy)", file=sys.stderr)
        return 2
    q = torch.randn(2, 2, 16, 64)  # small: the output's allocation stays cheap on a CPU
    interpreting, tf.INTERPRET = tf.INTERPRET, True
    check_us = _per_call_us(lambda: tf.check_inputs(q, q, q, True, 0), args.calls)
    tf.INTERPRET = interpreting
    real_kernel, real_check = tf._attn_fwd, tf.check_inputs
    tf._attn_fwd, tf.check_inputs = _Kernel(), (lambda *a: None)
    try:
        tf.flash_attention(q, q, q)  # the key's first call: "autotune", remember
        known_us = _per_call_us(lambda: tf.flash_attention(q, q, q), args.calls)
    finally:
        tf._attn_fwd, tf.check_inputs = real_kernel, real_check
    alloc_us = _per_call_us(lambda: torch.empty_like(q), args.calls)
    print(f"known key, per call: {known_us:.2f} us (the output's allocation: {alloc_us:.2f})")
    print(f"check_inputs: {check_us:.2f} us (a key's first call only; a known key skips it)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
