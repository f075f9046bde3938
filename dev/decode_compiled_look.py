"""Why compiled triton-flash is slower than eager at a decode shape: each path's do_bench median
(with and without L2 flushing between calls), its host time per call (a user's loop,
synchronized once), and the kernels a profile of ten calls shows with their device times; for
each compiled path, Dynamo's counters after the timed calls (a recompile or a guard failure per
call would show there) and the host functions that take its time (cProfile over 300 calls,
after every timing). sdpa beside it is the compiled call's cost without our op; `opaque` is
triton-flash compiled through an opaque custom op around its eager call; `static` is
triton-flash compiled with Inductor's static launcher for user-defined Triton kernels
(`static_launch_user_defined_triton_kernels`, off by default), where this torch has it.
Every path is timed before the first profiler session of the process: a profiled process's
later calls are not a user's.

Usage (GPU): python dev/decode_compiled_look.py [--shape 1x32g8x1x32768x128]
    [--variants triton-flash,sdpa]
"""

from __future__ import annotations

import argparse
import time

import torch
import triton.testing

from compilekit.compile.variant import load_variant
from compilekit.measure import inputs as inputs_mod
from compilekit.model.spec import Cell, parse_shape


def timing(name: str, fn, args) -> None:
    """do_bench's median, the host time per call of a user's loop, and one CUDA graph's."""
    fn(*args)
    torch.cuda.synchronize()
    flushed = triton.testing.do_bench(lambda: fn(*args), warmup=50, rep=300)
    bench = getattr(triton.testing, "do_bench_cudagraph", None)
    start = time.perf_counter()
    for _ in range(200):
        fn(*args)
    host_us = (time.perf_counter() - start) / 200 * 1e6
    torch.cuda.synchronize()
    try:  # the device time alone: the calls replayed from one graph, no host in between
        graph = bench(lambda: fn(*args), rep=100)
    except Exception:  # noqa: BLE001  (a path that cannot be captured: no figure)
        graph = float("nan")
    print(f"{name:16} do_bench {flushed * 1e3:8.1f} us  host per call {host_us:7.1f} us  "
          f"cuda graph {graph * 1e3:8.1f} us")  # fmt: skip


def kernels(name: str, fn, args) -> None:
    """The kernels ten calls launch, with their device time per call."""
    print(name)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(10):
            fn(*args)
        torch.cuda.synchronize()
    for e in prof.key_averages():
        if e.device_time_total > 0:
            print(f"    {e.key[:90]:90} x{e.count:3}  {e.device_time_total / e.count:8.1f} us")


def host_profile(name: str, fn, args) -> None:
    """Dynamo's counters, then the 15 host functions with the most own time over 300 calls."""
    import cProfile
    import pstats

    from torch._dynamo.utils import counters

    print(f"    {name}: dynamo counters " + str({k: dict(v) for k, v in counters.items() if v}))
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(300):
        fn(*args)
    profile.disable()
    torch.cuda.synchronize()
    stats = pstats.Stats(profile)
    rows = sorted(stats.stats.items(), key=lambda kv: kv[1][2], reverse=True)[:15]
    for (path, line, func), (_, calls, own, total, _) in rows:
        where = f"{'/'.join(path.rsplit('/', 2)[-2:])}:{line} {func}"[:80]
        print(f"      {where:80} {calls / 300:5.1f}/call  own {own / 300 * 1e6:6.1f} us")


def opaque(attention):
    """attention compiled through an opaque custom op whose body is the eager call (its fast
    path): Inductor calls it as one extern kernel, without seeing the Triton kernels. Set beside
    the triton_op path, it says what the op's compiled launch costs over an eager call."""

    @torch.library.custom_op("compilekit_dev::opaque_attention", mutates_args=())
    def op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return attention(q, k, v)

    @op.register_fake
    def _(q, k, v):
        return torch.empty_like(q)

    return torch.compile(lambda q, k, v: op(q, k, v))


def paths(name: str, variant) -> dict:
    """The ways of calling one variant this look compares, by name."""
    out = {"eager": variant.attention, "compiled": torch.compile(variant.attention)}
    if name == "triton-flash":
        if hasattr(torch._inductor.config, "static_launch_user_defined_triton_kernels"):
            out["static"] = torch.compile(
                variant.attention, options={"static_launch_user_defined_triton_kernels": True}
            )
        out["opaque"] = opaque(variant.attention)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", default="1x32g8x1x32768x128")
    parser.add_argument("--variants", default="triton-flash,sdpa")
    args = parser.parse_args()
    cell = Cell("look", "eager", parse_shape(args.shape), "bfloat16", "cuda")
    print(args.shape)
    looks = []
    for name in args.variants.split(","):
        variant = load_variant(name)
        inputs = inputs_mod.cell_inputs(variant, cell)
        for path, fn in paths(name, variant).items():
            looks.append((f"{name} {path}", path, fn, inputs))
    for label, _, fn, inputs in looks:  # every timing before any profiler
        timing(label, fn, inputs)
    for label, path, fn, inputs in looks:
        kernels(label, fn, inputs)
        if path != "eager":
            host_profile(label, fn, inputs)


if __name__ == "__main__":
    main()
