"""Does a new batch recompile? After a varlen cell's figures, its compiled callable is called
once more on another batch of the same kind (the distribution's next seed; listed lengths
with one token more on each document): whether Dynamo compiled again, how many graphs, its
reasons in torch's words, and the seconds that first call took (a new compile's cost)."""

from __future__ import annotations

import dataclasses


def another_batch(shape, seed: int):
    """(the other batch's shape, with its lengths, and its seed)."""
    if shape.dist:
        lengths = shape.draw(seed + 1)
        return dataclasses.replace(shape, lengths=tuple(lengths)), seed + 1
    return dataclasses.replace(shape, lengths=tuple(n + 1 for n in shape.lengths)), seed


def second_batch(cell, variant, compiled) -> dict:
    """The record of a compiled call on another batch (measure_cell keeps it in
    result.varlen["second_batch"])."""
    from torch._dynamo.utils import counters

    from compilekit.evidence import diagnose
    from compilekit.measure import timing, workload

    shape, seed = another_batch(cell.shape, cell.seed)
    made = workload.build(variant.factory, variant.name, shape, cell.dtype, cell.device, seed)
    graphs, reasons = counters["stats"].get("unique_graphs", 0), len(diagnose.recompile_reasons())
    seconds, _ = timing.first_call_s(compiled, made.inputs, cell.device)
    new_reasons = diagnose.recompile_reasons()[reasons:]
    return {
        "lengths": list(shape.lengths),
        "seed": seed,
        "first_call_s": seconds,
        "new_graphs": counters["stats"].get("unique_graphs", 0) - graphs,
        "recompiled": bool(new_reasons),
        "reasons": new_reasons[:5],
    }
