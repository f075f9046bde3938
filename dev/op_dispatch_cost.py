"""What registering an opaque kernel as an op costs the host per call (CPU or GPU).

gluon-flash reaches torch.compile as an op Inductor cannot see into, and its compiled call is
host-bound at small shapes on the H200 (0.135 ms of host per call at 8x16x1024x64). The same
do-nothing op (it returns torch.empty_like(q)) is registered twice, as a
torch.library.custom_op and as a plain CompositeExplicitAutograd kernel on a
torch.library.Library, and each is timed per call called directly and from a torch.compile'd
function, beside the plain Python function, the same work compiled with no op around it (what
torch.compile's own frame and wrappers cost) and the CPU's speed (dev/cpu_speed.loop_ns).

Usage: python3 dev/op_dispatch_cost.py [--device cpu|cuda] [--calls 20000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import cpu_speed  # dev/cpu_speed.py: a script's own folder is first on sys.path
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _fake(q, k, v, causal):
    return torch.empty_like(q)


def register() -> dict:
    """{name: callable}: the plain function and the two registrations of the same op."""

    @torch.library.custom_op("op_dispatch_cost::via_custom_op", mutates_args=())
    def via_custom_op(
        q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool
    ) -> torch.Tensor:
        return torch.empty_like(q)

    via_custom_op.register_fake(_fake)
    lib = torch.library.Library("op_dispatch_cost", "FRAGMENT")
    lib.define("via_library(Tensor q, Tensor k, Tensor v, bool causal) -> Tensor")
    lib.impl("via_library", _fake, "CompositeExplicitAutograd")
    torch.library.register_fake("op_dispatch_cost::via_library", _fake, lib=lib)
    register.keep = lib  # the op lives as long as its Library
    ops = torch.ops.op_dispatch_cost
    return {
        "plain Python function": _fake,
        "custom_op": ops.via_custom_op.default,
        "Library impl": ops.via_library.default,
    }


def per_call_us(fn, args, calls: int) -> float:
    for _ in range(200):
        fn(*args)
    start = time.perf_counter()
    for _ in range(calls):
        fn(*args)
    return (time.perf_counter() - start) / calls * 1e6


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        print("op_dispatch_cost: --device cuda needs a CUDA GPU", file=sys.stderr)
        return 2
    q = torch.randn(1, 4, 128, 64, device=args.device)
    fns = register()
    for name in ("custom_op", "Library impl"):
        op = fns[name]
        fns[f"{name}, compiled"] = torch.compile(lambda q, k, v, c, op=op: op(q, k, v, c))
    # the same work with no op around it: what torch.compile's frame and wrappers cost alone
    fns["aten empty_like, compiled"] = torch.compile(_fake)
    print(f"torch {torch.__version__}, {args.device}; us per call, median of {args.rounds} rounds")
    for name, fn in fns.items():
        rounds, speeds = [], []
        for _ in range(args.rounds):
            speeds.append(cpu_speed.loop_ns())
            rounds.append(per_call_us(fn, (q, q, q, True), args.calls))
        print(
            f"{name:28} {statistics.median(rounds):8.2f} us  (rounds "
            + ", ".join(f"{r:.2f}" for r in rounds)
            + f"; CPU {min(speeds):.0f}-{max(speeds):.0f} ns per step)",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
