"""How a cell ends early, in words a user acts on, and as fields of its record: a refusal
(unsupported), a failure (out of memory, in the words a sweep runs again alone; a variant's
error; a failure a variant declares as a known limit of a mode), or a wrong output.

Every phase of a cell process raises CellEnded; cell.main records it through record_end.
"""

from __future__ import annotations

from compilekit.model.errors import first_line  # noqa: F401  (calls.py reads it from here)


class CellEnded(Exception):
    """The cell cannot go on: its status (unsupported, failed, wrong) and the reason."""

    def __init__(self, status: str, reason: str, out_of_memory: bool = False):
        super().__init__(reason)
        self.status, self.reason, self.out_of_memory = status, reason, out_of_memory


# torch's own words for "this device / dtype / backend does not do that"
REFUSALS = (
    "No available kernel",
    "No viable backend",
    "not implemented for '",
    "Could not run '",
    "is not supported on",
)


def refusal(reason: str, warned: list[str], shape) -> str:
    """A refusal in one line: torch's reason and the warnings that explain it, without torch's
    "(Triggered internally at ...)" and its bare "... kernel not used because:" headers, each
    once; where the shape has fewer K/V heads than query heads and torch names the heads, one
    sentence that says so (a pinned SDPA backend's refusal of GQA was 700 characters)."""
    import re

    texts = [re.sub(r"\s*\(Triggered internally at [^)]*\)\.?", "", t).strip() for t in warned]
    texts = [t for t in [reason.strip(), *texts] if t and not t.endswith("because:")]
    if getattr(shape, "kv_groups", 0) and any(
        "num_heads" in t or "grouped query" in t.lower() or "gqa" in t.lower() for t in texts
    ):
        return (
            f"this backend takes no GQA here ({shape.heads} query heads over {shape.kv_groups} "
            "K/V heads): choose sdpa or sdpa-gqa, where SDPA picks a backend that does"
        )
    return "; ".join(dict.fromkeys(texts))


def out_of_memory(exc: BaseException, shape) -> CellEnded | None:
    """The cell's end where exc is the GPU (or host) running out of memory, wherever in the
    cell it happened, else None. Every such reason starts "out of memory": a sweep that ran the
    cell beside others runs it again alone (sweep.out_of_memory)."""
    import re

    import torch

    text = str(exc)
    if not (isinstance(exc, torch.OutOfMemoryError) or "out of memory" in text.lower()):
        return None
    size = re.search(r"allocate ([\d.]+ [KMGT]i?B)", text) or re.search(
        r"allocate (\d+) bytes", text
    )
    # torch names each other process on the GPU with its share ("Process 3017 has 53.48
    # GiB memory in use"): a cell beside others in a sweep may fit when it runs alone
    others = sum(float(g) for g in re.findall(r"Process \d+ has ([\d.]+) GiB memory", text))
    fix = "try a smaller shape"
    if others >= 1:
        fix = f"other processes held {others:.1f} GiB of the GPU: run it alone, or {fix}"
    elif not size:  # the driver's bare "CUDA error: out of memory" names neither
        fix = f"{first_line(exc)}; run it alone, or {fix}"
    if not size:
        return CellEnded("failed", f"out of memory at shape {shape}: {fix}", True)
    amount = f"{int(size[1]) / 2**30:.2f} GiB" if size[1].isdigit() else size[1]
    return CellEnded("failed", f"out of memory allocating {amount} at shape {shape}: {fix}", True)


def classify(exc: BaseException, shape) -> CellEnded:
    """An exception from running the variant eagerly, as the cell's status and reason."""
    from compilekit.model.errors import Unsupported

    short = out_of_memory(exc, shape)
    if short:
        return short
    text = str(exc)
    if isinstance(exc, Unsupported) or any(r in text for r in REFUSALS):
        return CellEnded("unsupported", first_line(exc).split(": ", 1)[-1])
    return CellEnded("failed", f"the variant raised {first_line(exc)} (traceback in log.txt)")


_LOADED: dict = {}  # variant spec -> Variant, as this process imported it


def cell_variant(cell):
    """The cell's variant, imported once per process: a user's file runs its top level once,
    and what a failure is checked against below is what ran."""
    if cell.variant not in _LOADED:
        from compilekit.compile.variant import load_variant

        _LOADED[cell.variant] = load_variant(cell.variant, cell.weights)
    return _LOADED[cell.variant]


def failure_in_mode(cell, what: str) -> tuple[str, str]:
    """(status, reason) for a cell that failed under its mode (compiling, or a compiled call):
    `unsupported` where the variant declares that mode a known limitation (KNOWN_LIMITS, with
    torch's words beside its reason), else `failed`. A failure of the eager probe is never
    explained this way: there the variant itself fails."""
    variant = _LOADED.get(cell.variant)  # None: it failed before the variant was imported
    why = variant.known_limits.get(cell.mode) if variant else None
    return ("unsupported", f"{why} (torch: {what})") if why else ("failed", what)


def failure_outside_probe(cell, exc: BaseException) -> CellEnded:
    """The end of a cell whose process raised outside the eager probe: out of memory in
    out_of_memory's words (making the inputs beside a neighbour's 128 GiB eager call ran out on
    the H200), else failure_in_mode with torch's first line."""
    short = out_of_memory(exc, cell.shape)
    if short:
        return short
    return CellEnded(*failure_in_mode(cell, f"{first_line(exc)} (traceback in log.txt)"))


def record_end(result, ended: CellEnded) -> None:
    """The record of a cell that ended early: its status and reason, and for a failure its kind
    (out_of_memory, which a sweep runs again alone; error otherwise) as a field."""
    result.status, result.reason = ended.status, ended.reason
    if ended.status == "failed":
        result.failure = "out_of_memory" if ended.out_of_memory else "error"
