"""A ragged batch in every view: its documents (or distribution and seed), the setup kept out
of the timed calls, and the share of computed pairs that were padding."""

from __future__ import annotations

COLUMN = "padding waste"


def has_varlen(results: list) -> bool:
    return any(r.varlen for r in results)


def waste_text(result) -> str:
    varlen = result.varlen or {}
    waste = varlen.get("padding_waste")
    return "-" if waste is None else f"{waste:.0%}"


def note(result) -> str | None:
    """One line: what the batch was, its setup time and its padding waste."""
    varlen = result.varlen
    if not varlen:
        return None
    made = (
        f"{varlen['distribution']}, seed {varlen['seed']}"
        if varlen.get("seed") is not None
        else "listed"
    )
    return (
        f"ragged batch: {varlen['documents']} documents of {varlen['shortest']}.."
        f"{varlen['longest']} tokens, {varlen['tokens']:,} in all ({made}); FLOPs from the "
        f"real lengths; setup (layout, masks, offsets) {varlen['setup_s'] * 1e3:.2f} ms, "
        f"outside the timed calls; padding waste {varlen['padding_waste']:.0%} of the pairs "
        "computed" + second_batch_text(varlen.get("second_batch"))
    )


def second_batch_text(second: dict | None) -> str:
    """'; another batch ...: recompiled (reason), first call 3.1 s' or '...: no recompile'."""
    if not second:
        return ""
    what = f"; another batch ({len(second['lengths'])} documents) "
    if not second["recompiled"]:
        return what + f"ran without a recompile (first call {second['first_call_s']:.3f} s)"
    why = f": {second['reasons'][0][:160]}" if second["reasons"] else ""
    return what + f"recompiled in {second['first_call_s']:.1f} s{why}"
