"""An experiment: its cells, their timeouts and its [against] table (compilekit/userexperiment.py
reads one from TOML, checked)."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass
class Experiment:
    name: str
    description: str
    cells: list  # list[Cell], in file order, duplicates removed
    timeout_s: dict  # cell label -> seconds
    path: str
    # variant -> [(baseline variant, mode)]: the report's per-shape comparison (baselines.py)
    against: dict = dataclasses.field(default_factory=dict)
    # cell label -> at most how many cells its GPU runs while it runs (its matrix's per_gpu:
    # cells that need much of the GPU's memory, such as a 7B model's)
    per_gpu: dict = dataclasses.field(default_factory=dict)


SAME_MODE = "same"  # a baseline's mode: the compared cell's own (eager beside eager, ...)


def parse_baseline(text: str) -> tuple[str, str]:
    """'variant:mode' -> (variant, mode); a user variant's own colon (file.py:fn) stays. The
    mode may be SAME_MODE: each cell is then set beside the baseline's cell of its own mode."""
    variant, _, mode = text.rpartition(":")
    return variant, mode


def against_json(against: dict) -> dict:
    """As sweep.json keeps it: {variant: ["variant:mode", ...]}."""
    return {variant: [f"{b}:{m}" for b, m in pairs] for variant, pairs in against.items()}
