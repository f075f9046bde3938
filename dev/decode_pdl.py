"""compilekit's decode loop compiled under reduce-overhead with its base Inductor options and
with each tried set added (by default Inductor's programmatic dependent launch,
`triton.enable_pdl`: on Hopper a kernel starts while the one before it finishes, and waits
for its writes), one model in one process: tokens/s, a profiled step's kernels (each one's
calls and time, the time they overlapped), and each config's logits against the base's.

A lean stand-in for a `compilekit run` cell per config (no eager or generate() paths, no
float32 check), for a device call too short for them:

    python3 dev/decode_pdl.py [--variant llama2-7b@triton-flash] [--shape 1x32+200] \
        [--set coordinate_descent_tuning=true ...] [--try NAME:OPTION=VALUE,...] [--json FILE]

--set gives the base's options (default: the matmul reductions tuned); each --try (default
`pdl:triton.enable_pdl=true`) a config of the base's options and its own. A config that
fails to compile or run records its reason and the others go on.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import torch

TUNED = ("coordinate_descent_tuning=true", "max_autotune_pointwise=true")


def options_of(pairs) -> dict:
    """torch.compile's keyword arguments for reduce-overhead with these key=value Inductor
    options, read and checked as a cell's --set options are."""
    from compilekit.compile import knobs, modes

    config = knobs.validate(dict(knobs.parse_assignment(pair) for pair in pairs))
    return knobs.compile_options(modes.MODES["reduce-overhead"][0], config)


def kernel_table(windows: list[list[tuple]]) -> list[dict]:
    """Per kernel name over the profiled steps: launches a step, mean us a launch, us a step;
    the most time first."""
    found: dict[str, list[float]] = {}
    for launches in windows:
        for start, end, name in launches:
            found.setdefault(name, []).append(end - start)
    steps = max(len(windows), 1)
    rows = [{"kernel": name, "calls": len(us) / steps, "us_per_call": statistics.fmean(us),
             "us_per_step": sum(us) / steps} for name, us in found.items()]  # fmt: skip
    return sorted(rows, key=lambda row: -row["us_per_step"])


def profiled_step(session, step, steps: int = 5) -> dict:
    """A profiled step's kernels: their count, summed time, the time any ran and their
    overlap (ms per step), and the table of them (kernel_table)."""
    from torch.profiler import ProfilerActivity, profile, record_function

    from compilekit.evidence import stepwindows
    from compilekit.evidence.profiling import WRAPPER_RE

    token, position = session.step_args
    if session.device.type != "cuda":
        return {"kernels": 0, "summed_ms": 0.0, "overlap_ms": 0.0, "busy_ms": 0.0, "table": []}
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            with record_function("decode_step"):
                step(token, position)
        torch.cuda.synchronize()
    windows = stepwindows.window_launches(prof.events(), "decode_step", WRAPPER_RE)
    summed = statistics.median(sum(e - s for s, e, _ in w) / 1e3 for w in windows)
    overlap = stepwindows.overlap_ms(windows)
    return {"kernels": statistics.median(len(w) for w in windows), "summed_ms": summed,
            "overlap_ms": overlap, "busy_ms": summed - overlap,
            "table": kernel_table(windows)}  # fmt: skip


def parse_try(text: str) -> tuple[str, list[str]]:
    """'NAME:OPTION=VALUE,...' -> (NAME, ['OPTION=VALUE', ...])."""
    name, sep, pairs = text.partition(":")
    if not sep or not name or not pairs:
        from compilekit.model.errors import UserError

        raise UserError(f"--try {text!r}: give NAME:OPTION=VALUE[,OPTION=VALUE...]")
    return name, pairs.split(",")


def measure(session, name: str, options: dict, forced=None) -> tuple:
    """Compile the step with `options` (torch.compile's keyword arguments; another backend
    than an earlier config's, so Dynamo compiles it apart and keeps both), time three
    generations after a short one; the row, the first run's tokens, the first 8 tokens'
    logits (teacher-forced on `forced` where given) and the compiled step. No profiler yet:
    main profiles every config's step after all are timed."""
    from tuned_configs import loaded_modules, tuned_configs

    from compilekit.measure.decode.loop import run_loop

    before = {id(module) for module in loaded_modules()}
    step = torch.compile(session.step, **options)
    start = time.perf_counter()
    run_loop(session, session.prefill, step, new=4)
    compile_s = time.perf_counter() - start
    configs = tuned_configs(skip=before)
    runs = [run_loop(session, session.prefill, step) for _ in range(3)]
    token_ms = [ms for run in runs for ms in run.token_ms]
    forced = forced if forced is not None else runs[0].tokens
    logits = run_loop(session, session.prefill, step, forced=forced, keep=range(8)).logits
    row = {
        "config": name,
        "compile_s": compile_s,
        "median_ms": statistics.median(token_ms),
        "tokens_per_s": 1e3 / statistics.fmean(token_ms),
        "tuned": configs,
    }
    print(
        f"{name:10} {row['median_ms']:.3f} ms/token, {row['tokens_per_s']:.1f} tokens/s "
        f"(compile {compile_s:.1f} s)",
        flush=True,
    )
    return row, runs[0].tokens, torch.stack(logits), step


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variant", default="llama2-7b@triton-flash")
    parser.add_argument("--shape", default="1x32+200")
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--set", action="append", default=None, dest="options")
    parser.add_argument("--try", action="append", default=None, dest="tries")
    parser.add_argument("--json")
    parser.add_argument("--device", default="cuda", help="cpu: the script's own check")
    args = parser.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        print("decode_pdl: needs a CUDA GPU (Hopper for PDL)", file=sys.stderr)
        return 2
    from compilekit.compile.variant import load_variant
    from compilekit.measure import workload
    from compilekit.measure.decode.session import Session
    from compilekit.model.errors import UserError
    from compilekit.model.spec import parse_shape

    pairs = args.options or list(TUNED)
    try:  # every config checked before a 7B model is built
        configs = {"base": options_of(pairs)}
        for name, extra in map(parse_try, args.tries or ["pdl:triton.enable_pdl=true"]):
            configs[name] = options_of([*pairs, *extra])
    except UserError as exc:
        print(f"decode_pdl: {exc}", file=sys.stderr)
        return 2
    shape = parse_shape(args.shape)
    made = workload.build(
        load_variant(args.variant).factory, args.variant, shape, args.dtype, args.device, 0
    )
    session = Session(made, shape, args.variant)
    rows, steps, logits, tokens = [], {}, {}, None
    for name, options in configs.items():
        try:
            row, run_tokens, logits[name], steps[name] = measure(session, name, options, tokens)
        except Exception as exc:  # one config's failure is its row's; the others go on
            row = {
                "config": name,
                "error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}",
            }
            print(f"{name:10} failed: {row['error']}", flush=True)
        tokens = run_tokens if tokens is None and "error" not in row else tokens
        rows.append(row)
    for row in rows:  # profiled only once every config is timed
        if row["config"] not in steps:
            continue
        found = row["profile"] = profiled_step(session, steps[row["config"]])
        print(
            f"{row['config']:10} a step's {found['kernels']:.0f} kernels: "
            f"{found['summed_ms']:.3f} ms summed, {found['busy_ms']:.3f} busy, "
            f"{found['overlap_ms']:.3f} overlapped"
        )
        for kernel in found["table"][:14]:
            print(f"    {kernel['calls']:5.1f} x {kernel['us_per_call']:8.2f} us = "
                  f"{kernel['us_per_step']:8.1f} us  {kernel['kernel'][:110]}")  # fmt: skip
            if kernel["kernel"] in row["tuned"]:
                print(f"          {row['tuned'][kernel['kernel']]}")
    base = rows[0]
    for row in rows[1:]:
        if "error" in row or "error" in base:
            continue
        scale = float(logits["base"].abs().max())
        row["logits_max_abs_diff"] = float((logits[row["config"]] - logits["base"]).abs().max())
        print(
            f"{row['config']} / base time per token: {row['median_ms'] / base['median_ms']:.3f}; "
            f"first 8 tokens' logits (forced on base's tokens) {row['logits_max_abs_diff']:.3g} "
            f"apart (largest logit {scale:.3g})"
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": str(session.device) if args.device != "cuda"
                       else torch.cuda.get_device_name(), "torch": torch.__version__,
                       "variant": args.variant, "shape": args.shape, "options": pairs,
                       "tries": args.tries,
                       "rows": rows}, f, indent=1)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
