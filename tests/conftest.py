"""Shared, session-wide runs: a cold compile costs 10-30 s on 2 cores, so each cell runs once."""

import os
import subprocess
import sys

import pytest

from compilekit import runner
from compilekit.spec import Cell, parse_shape

# Big enough that kernel time dominates Python overhead (the 15% sum check needs that).
CPU_SHAPE = "1x8x512x64"
SMALL_SHAPE = "1x4x128x32"  # H a multiple of the GQA group (4)
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="session")
def cache_root(tmp_path_factory):
    """A fresh compile cache per session, or COMPILEKIT_CACHE's (to reuse a sweep's compiles)."""
    return os.environ.get("COMPILEKIT_CACHE") or str(tmp_path_factory.mktemp("compile_cache"))


@pytest.fixture(scope="session")
def run_cell(tmp_path_factory, cache_root):
    """run_cell(variant, mode, shape=, dtype=, config=) -> CellResult (run_dir set); memoized."""
    out = str(tmp_path_factory.mktemp("runs"))
    done = {}

    def run(variant, mode, shape=SMALL_SHAPE, dtype="float32", device="cpu", config=None):
        from compilekit.knobs import name_of

        config = config or {}
        key = (variant, mode, shape, dtype, device, repr(sorted(config.items())))
        if key not in done:
            name = name_of(config) if config else ""
            items = tuple(sorted(config.items()))
            cell = Cell(variant, mode, parse_shape(shape), dtype, device, 0, items, name)
            done[key] = runner.launch(cell, out, cache_root=cache_root, timeout_s=900)
        return done[key]

    return run


@pytest.fixture(scope="session")
def cli(cache_root):
    """cli(*args) -> CompletedProcess of `python -m compilekit ...` with the session's cache."""

    def call(*args, cwd=ROOT, env=None):
        """env: variables to set (None as a value removes one)."""
        env = {**os.environ, "COMPILEKIT_CACHE": cache_root, **(env or {})}
        env = {k: v for k, v in env.items() if v is not None}
        return subprocess.run(
            [sys.executable, "-m", "compilekit", *args],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
        )

    return call
