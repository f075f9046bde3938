"""The report's "Not finished" line says what a stopped sweep left and which command finishes it."""

import json

from compilekit.report import baselines


def _sweep(tmp_path, cells: int, complete: bool):
    (tmp_path / "sweep.json").write_text(
        json.dumps({"path": "experiments/memory.toml", "cells": cells, "complete": complete})
    )
    return str(tmp_path)


def test_a_sweep_stopped_between_cells_names_how_many_are_missing(tmp_path):
    line = baselines.unfinished(_sweep(tmp_path, 48, False), 37)[0]
    assert "37 of the 48 cells" in line
    assert "--out` this folder runs the rest" in line


def test_a_sweep_stopped_after_its_last_cell_names_the_retries_not_missing_cells(tmp_path):
    """Every cell stored but the sweep killed while it ran failed cells again, alone: a plain
    resume would run nothing, so the line names --retry-failed and says no cell is missing."""
    line = baselines.unfinished(_sweep(tmp_path, 48, False), 48)[0]
    assert "every cell of `experiments/memory.toml` is here" in line
    assert "--retry-failed --retry-noisy" in line
    assert "of the 48 cells" not in line


def test_a_complete_sweep_says_nothing(tmp_path):
    assert baselines.unfinished(_sweep(tmp_path, 48, True), 48) == []
