"""Shared, session-wide runs: a cold compile costs 10-30 s on 2 cores, so each cell runs once
in a pytest process (`make test` runs two, each with its own session and compile cache)."""

import os
import subprocess
import sys

# `make test` runs two workers on a machine of two cores: a CPU cell's kernels on two OpenMP
# threads beside the other worker's compiles wait out whole scheduler slices at their barriers
# (a 0.15 ms call read 48 ms). One thread per process, inherited by every process a test starts.
os.environ.setdefault("OMP_NUM_THREADS", "1")

import pytest  # noqa: E402

from compilekit import usercell
from compilekit.model.spec import Cell, parse_shape
from compilekit.report import pages

# Big enough that kernel time dominates Python overhead (the 15% sum check needs that).
CPU_SHAPE = "1x8x512x64"
SMALL_SHAPE = "1x4x128x32"  # H a multiple of the GQA group (4)
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CPU_SMALL = os.path.join(ROOT, "experiments", "cpu_small.toml")


@pytest.fixture(scope="session")
def cache_root(tmp_path_factory):
    """A fresh compile cache per session, or COMPILEKIT_CACHE's (to reuse a sweep's compiles)."""
    return os.environ.get("COMPILEKIT_CACHE") or str(tmp_path_factory.mktemp("compile_cache"))


@pytest.fixture(scope="session", autouse=True)
def one_cache_for_the_session(cache_root):
    """Every cell a test starts, in this process or in a child it starts (a CLI call, a sweep,
    Ray's workers), compiles under the session's cache root: nothing goes into the user's own
    cache, and the root's CPU ISA probes are built once. Put back as it was after the session."""
    before = os.environ.get("COMPILEKIT_CACHE")
    os.environ["COMPILEKIT_CACHE"] = cache_root
    yield
    if before is None:
        os.environ.pop("COMPILEKIT_CACHE", None)
    else:
        os.environ["COMPILEKIT_CACHE"] = before


@pytest.fixture(scope="session")
def run_cell(tmp_path_factory, cache_root):
    """run_cell(variant, mode, shape=, dtype=, config=) -> CellResult (run_dir set); memoized."""
    out = str(tmp_path_factory.mktemp("runs"))
    done = {}

    def run(variant, mode, shape=SMALL_SHAPE, dtype="float32", device="cpu", config=None):
        from compilekit.compile.knobs import name_of

        config = config or {}
        key = (variant, mode, shape, dtype, device, repr(sorted(config.items())))
        if key not in done:
            name = name_of(config) if config else ""
            items = tuple(sorted(config.items()))
            cell = Cell(variant, mode, parse_shape(shape), dtype, device, 0, items, name)
            done[key] = usercell.run_cell(cell, out, cache_root=cache_root, timeout_s=900)
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


def _no_browser(reason: str):
    """Skip with the reason; fail instead where CI says a browser must be there."""
    if os.environ.get("COMPILEKIT_BROWSER_REQUIRED"):
        pytest.fail(f"COMPILEKIT_BROWSER_REQUIRED is set but {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def browser():
    """Headless Chromium (Debian's /usr/bin/chromium, or $CHROMIUM) driven by Playwright."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _no_browser("playwright is not installed (pip install -e '.[dev]')")
    executable = os.environ.get("CHROMIUM", "/usr/bin/chromium")
    if not os.path.isfile(executable):
        _no_browser(f"no Chromium at {executable} (apt-get install chromium, or set CHROMIUM)")
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=executable, args=pages.CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def open_page(browser):
    """open_page(path) -> (page, errors): a file loaded in a fresh tab; errors collects console
    errors and uncaught exceptions as they happen."""
    pages = []

    def load(path):
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        errors = []
        page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto("file://" + os.path.abspath(path))
        pages.append(page)
        return page, errors

    yield load
    for page in pages:
        page.close()


def png_colors(png: bytes) -> int:
    """How many distinct byte values the decompressed pixel data of a PNG holds: a blank page
    gives a handful (one color and the row filter bytes), a drawn page hundreds."""
    import struct
    import zlib

    pos, data = 8, b""
    while pos < len(png):
        (length,) = struct.unpack(">I", png[pos : pos + 4])
        kind = png[pos + 4 : pos + 8]
        if kind == b"IDAT":
            data += png[pos + 8 : pos + 8 + length]
        pos += 12 + length
    return len(set(zlib.decompress(data)))


@pytest.fixture(scope="session")
def small_sweep(tmp_path_factory, cache_root):
    """(CompletedProcess, out dir) of `compilekit sweep experiments/cpu_small.toml`, run once."""
    out = tmp_path_factory.mktemp("cpu_small")
    env = {**os.environ, "COMPILEKIT_CACHE": cache_root}
    proc = subprocess.run(
        [sys.executable, "-m", "compilekit", "sweep", CPU_SMALL, "--out", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    return proc, out


_EXIT = {}


def pytest_sessionfinish(session, exitstatus):
    _EXIT["status"] = int(exitstatus)


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    """End the test process once pytest is done, without the interpreter's teardown: there
    Triton's bindings print some 30 lines of nanobind leak warnings (nothing to act on, and
    nothing of ours) after pytest's summary."""
    if "triton" in sys.modules and "status" in _EXIT:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(_EXIT["status"])


USER_VARIANT = '''"""Soft-capped causal attention (Gemma-2 style), an op no built-in variant uses."""
import math
import torch


def capped_attention(q, k, v):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    scores = 30.0 * torch.tanh(scores / 30.0)
    mask = torch.ones(q.shape[-2], q.shape[-2], dtype=torch.bool, device=q.device).triu(1)
    scores = scores.masked_fill(mask, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v
'''


def gpu_lock_state(path) -> str:
    """What holds the GPU lock at path: "alone" (no other process may share it), "shared"
    (others may share it, not take it alone) or "free"."""
    import fcntl

    with open(path, "a") as other:
        for how, holds in ((fcntl.LOCK_SH, "alone"), (fcntl.LOCK_EX, "shared")):
            try:
                fcntl.flock(other, how | fcntl.LOCK_NB)
            except BlockingIOError:
                return holds
            fcntl.flock(other, fcntl.LOCK_UN)
    return "free"


@pytest.fixture(scope="session")
def user_variant(tmp_path_factory):
    """A user's variant file (`path.py`), one for the session: its cells compile once."""
    path = tmp_path_factory.mktemp("user") / "capped.py"
    path.write_text(USER_VARIANT)
    return str(path)
