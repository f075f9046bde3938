"""dev/decode_pdl.py: a profiled step's kernels tabled per name (launches a step, time a
launch, time a step, the most time first), and a --try config read or refused in one line.
Not part of `make test` (dev/ is the lab): `python -m pytest dev/tests`."""

import decode_pdl
import pytest


def test_kernels_are_tabled_per_name_per_step_most_time_first():
    steps = [
        [(0, 10, "mm_o"), (10, 14, "norm"), (14, 44, "mm_gate_up"), (44, 54, "mm_o")],
        [(0, 12, "mm_o"), (12, 16, "norm"), (16, 46, "mm_gate_up"), (46, 54, "mm_o")],
    ]
    table = decode_pdl.kernel_table(steps)
    assert [row["kernel"] for row in table] == ["mm_gate_up", "mm_o", "norm"]
    assert table[1]["calls"] == 2 and table[1]["us_per_call"] == 10
    assert table[1]["us_per_step"] == 20 and table[2]["us_per_step"] == 4


def test_a_try_is_a_name_and_its_options_or_one_line():
    from compilekit.model.errors import UserError

    assert decode_pdl.parse_try("pdl:triton.enable_pdl=true,combo_kernels=true") == (
        "pdl",
        ["triton.enable_pdl=true", "combo_kernels=true"],
    )
    with pytest.raises(UserError, match="NAME:OPTION=VALUE"):
        decode_pdl.parse_try("triton.enable_pdl=true")
