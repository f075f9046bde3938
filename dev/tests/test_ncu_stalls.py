"""dev/ncu_stalls.py: a source page's stall samples by opcode and by instruction, per kernel;
a file without the columns says which it has. Not part of `make test`: `python -m pytest
dev/tests`."""

import csv
import re

import ncu_stalls
import pytest

HEADER = ["# Address", "Source", "Warp Stall Sampling (All Samples)",
          "Warp Stall Sampling (Not-issued Samples)", "stall_barrier", "stall_long_sb",
          "stall_wait"]  # fmt: skip


def _write(path, tables):
    with open(path, "w", newline="") as f:
        out = csv.writer(f)
        for name, rows in tables:
            out.writerow([name])
            out.writerow(HEADER)
            out.writerows(rows)


def test_samples_by_opcode_and_instruction_per_kernel(tmp_path, capsys):
    path = tmp_path / "sass.csv"
    _write(path, [
        ("attn_fwd", [
            ["0x10", "BAR.SYNC.DEFER_BLOCKING 0x0, 0x80", "600", "590", "580", "0", "10"],
            ["0x20", "@!P0 BAR.SYNC.DEFER_BLOCKING 0x1, 0x80", "200", "200", "200", "0", "0"],
            ["0x30", "SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [R1]", "150", "150", "0", "150", "0"],
            ["0x40", "HGMMA.64x128x16.F32.BF16 R24, gdesc[UR4], R24", "50", "10", "0", "0", "10"],
            ["0x50", "MOV R1, R2", "0", "0", "0", "0", "0"],
        ]),
        ("cudnn_kernel", [["0x10", "EXIT", "5", "5", "0", "0", "5"]]),
    ])  # fmt: skip
    assert ncu_stalls.main([str(path), "--top", "2"]) == 0
    text = capsys.readouterr().out
    first, second = text.split("cudnn_kernel")
    assert "attn_fwd: 1,000 stall samples, 4 instructions" in first
    # both BAR.SYNC lines, the predicated one too, are one opcode: 80% of the samples
    assert re.search(r"80\.0%  BAR\.SYNC +barrier 98%, wait 1%", first), first
    assert "15.0%  SYNCS.PHASECHK" in first and "long_sb 100%" in first
    assert "HGMMA" not in first.split("instructions with")[0]  # --top 2 opcodes
    assert "60.0%      0x10  BAR.SYNC.DEFER_BLOCKING 0x0, 0x80" in first
    assert "5 stall samples, 1 instructions" in second


def test_a_file_without_the_columns_names_those_it_has(tmp_path):
    path = tmp_path / "details.csv"
    path.write_text('"ID","Kernel Name","Metric Name","Metric Value"\n"0","k","Duration","5"\n')
    with pytest.raises(SystemExit, match="no table with a 'Source'.*ID, Kernel Name, Metric Name"):
        ncu_stalls.main([str(path)])
