"""Whether compiling paid, in words that never contradict the speedup beside them."""

import dataclasses

from compilekit.model.result import CellResult
from compilekit.report import cellview
from compilekit.report.worth import break_even_calls, pays_text

FASTER = CellResult(
    "bert-base", "default", "1x128", "float32", "cpu", status="ok", eager_ms=8.0,
    compiled_ms=1.0, speedup=8.0, eager_timing={"p10_ms": 7.5}, compiled_timing={"p90_ms": 1.2},
    compile_cold_s=20.0, compile_warm_s=2.0,
)  # fmt: skip


def _summary_line(result) -> str:
    return next(
        ln for ln in cellview.cell_summary(result).splitlines() if ln.startswith("compile")
    )


def test_a_speedup_within_a_noisy_spread_is_an_unknown_break_even_not_never():
    """On a noisy CPU a cell read "speedup 8.01x" and "never pays off" together."""
    assert "pays off after 2,858 calls (cold), 286 (warm)" in _summary_line(FASTER)
    noisy = dataclasses.replace(FASTER, compiled_timing={"p90_ms": 9.0}, noisy=True)
    assert break_even_calls(20.0, noisy) is None
    assert "break-even unknown: faster at the median" in _summary_line(noisy)
    assert "never" not in _summary_line(noisy)
    slower = dataclasses.replace(
        FASTER, compiled_ms=9.0, speedup=0.89, compiled_timing={"p90_ms": 9.5}
    )
    assert "never pays off" in _summary_line(slower)
    assert pays_text(slower, "never", "never").startswith("never pays off")
