"""The calls every process of a cell makes the same way: the eager probe, the first compiled
call, the output checks, the cell's graph pass, the GPU turn of a compile."""

from __future__ import annotations

import traceback

from compilekit.measure import failures


def make_device_context(device: str, result) -> None:
    """The CUDA context, made before the process takes its GPU's lock: seconds of the driver's
    and the CPU's work, no kernel, that other cells' timed calls need not wait for. What fails
    here is left to the first kernel to report (inputs.dtype_probe)."""
    if device != "cuda":
        return
    import torch

    with result.step("cuda_context"):
        try:
            torch.empty(1, device="cuda")
        except RuntimeError:
            pass


def _eager_probe(variant, args, cell):
    """Run the variant once eagerly: its output, or failures.CellEnded with torch's words (and the
    warnings that explain a refusal)."""
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            return variant.attention(*args)
        except Exception as exc:
            traceback.print_exc()
            ended = failures.classify(exc, cell.shape)
            why = [
                str(w.message).splitlines()[0]
                for w in caught
                if any(
                    k in str(w.message)
                    for k in ("kernel not used", "not supported", "require", "num_heads")
                )
            ]
            if ended.status == "unsupported":
                ended.reason = failures.refusal(ended.reason, why[:4], cell.shape)
            verb = "cannot run on" if ended.status == "unsupported" else "failed on"
            where = f"{cell.device} {cell.dtype} at {cell.shape}"
            ended.reason = f"{cell.variant!r} {verb} {where}: {ended.reason}"
            raise ended from None


def eager_first(variant, args, cell):
    """The eager probe of a cell: (its output, None), or (None, why) where a compiled mode's
    eager call ran out of memory. The compiled call may fit where eager's does not (flex's
    eager path holds every score: 64 GiB at 4x16x16384): that cell goes on, compiled alone."""
    try:
        return _eager_probe(variant, args, cell), None
    except failures.CellEnded as ended:
        if cell.mode == "eager" or not ended.out_of_memory:
            raise
        reason = ended.reason
        # torch's error (ended.__context__) keeps the failed call's frames, and with them every
        # tensor it made, in a cycle through the probe's frame: on the H200 flex's 129 GiB
        # stayed held and the float64 reference then ran out of memory
        ended.__context__ = None
    import gc

    gc.collect()
    if cell.device == "cuda":  # give the freed blocks back for the reference and compile
        import torch

        torch.cuda.empty_cache()
    return None, f"eager could not run ({reason}): only the compiled call was checked and timed"


def checked(out, expected: tuple, what: str, result) -> None:
    """CellEnded unless `out` can be the cell's answer (expected: inputs.expected_output); the
    output's dtype goes on the record."""
    from compilekit.measure import inputs

    if hasattr(out, "dtype"):
        result.output_dtype = str(out.dtype).removeprefix("torch.")
    problem = inputs.output_problem(out, *expected)
    if problem:
        status = "wrong" if problem.startswith(("output shape", "output dtype")) else "failed"
        raise failures.CellEnded(status, f"{what} {problem}")


def compiled_first_call(cell, variant, args, record: dict | None = None):
    """A fresh torch.compile wrapper and the seconds of its first call (the compile), less the
    seconds it waited in a sweep for another cell's figure (record["gpu_lock_wait_s"] grows
    by them: compilekit/measure/locks.py)."""
    from compilekit.compile import modes
    from compilekit.measure import timing

    record = {} if record is None else record
    compiled = modes.build(cell.mode, variant.attention, dict(cell.config))
    waited = record.get("gpu_lock_wait_s", 0)
    try:
        seconds, out = timing.first_call_s(compiled, args, cell.device)
        seconds -= record.get("gpu_lock_wait_s", 0) - waited
    except Exception as exc:
        traceback.print_exc()
        # Dynamo wraps the backend's error; its own first line is only "backend='inductor'
        # raised:": name the error underneath (a user's pass, a lowering failure)
        inner = getattr(exc, "inner_exception", None) or exc.__cause__
        why = (
            failures.first_line(exc)
            if inner is None
            else f"{failures.first_line(inner)} (inside Inductor)"
        )
        raise failures.CellEnded(
            *failures.failure_in_mode(cell, f"torch.compile failed: {why}")
        ) from None
    return compiled, seconds, out


def cell_pass(cell):
    """The cell's custom graph passes as one composite pass, or None (compile/passes.py)."""
    if not cell.passes:
        return None
    from compilekit.compile.passes import composite

    return composite(list(cell.passes))
