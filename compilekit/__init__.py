"""compilekit: what torch.compile did to your attention, and whether it was worth it.

From Python (a notebook, a script), the same as the command line:

    import compilekit
    result = compilekit.run(variant="naive", mode="default")   # runs in its own processes
    result.status, result.compiled_ms, result.speedup, result.run_dir
    again = compilekit.load(result.run_dir)                    # a run directory read back
    with compilekit.profile() as p:                            # any forward, as written
        model(**inputs)
    print(p.table(by="memory"))

A model of one's own: a factory `workload(shape, dtype, device)` returning
compilekit.Workload(model, inputs), run as VARIANT=path/to/file.py:workload.
"""

import os
import sys

# The folder holding compilekit/: a checkout (beside variants/, tests/, experiments/), or
# site-packages.
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _map_checkout_variants() -> None:
    """Make compilekit.variants importable in a checkout that runs from PYTHONPATH without an
    install: there the variants lie in the top-level variants/, which an install (a wheel, or
    an editable one's finder) maps into this package as pyproject's package-dir says."""
    name = __name__ + ".variants"
    folder = os.path.join(ROOT, "variants")
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "variants")
    if name in sys.modules or os.path.isdir(here) or not os.path.isdir(folder):
        return
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        name, os.path.join(folder, "__init__.py"), submodule_search_locations=[folder]
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)


_map_checkout_variants()

# what a model factory returns (docs/models.md); it imports no torch
from compilekit.model.workload import Workload as Workload  # noqa: E402


def _version() -> str:
    """The version, from one place: the package's metadata, or where a checkout runs from
    PYTHONPATH without being installed, the pyproject.toml that metadata comes from."""
    from importlib import metadata

    try:
        return metadata.version("compilekit")
    except metadata.PackageNotFoundError:
        pass
    try:
        import tomllib

        path = os.path.join(ROOT, "pyproject.toml")
        with open(path, "rb") as f:
            return tomllib.load(f)["project"]["version"]
    except (ImportError, OSError, KeyError, ValueError):
        return "unknown"


__version__ = _version()


def run(
    variant: str = "naive",
    mode: str = "default",
    shape: str | None = None,
    dtype: str | None = None,
    device: str = "auto",
    seed: int = 0,
    out: str = "runs",
    fresh: bool = False,
    timeout_s: float = 1800,
    config: dict | None = None,
    passes: list[str] | None = None,
    grad: str = "off",
    weights: str = "auto",
):
    """Measure one cell (in fresh processes, as `compilekit run` does); returns its CellResult.

    config: Inductor options for this cell ({"coordinate_descent_tuning": True}), as --set;
    passes: custom graph passes (["path/to/file.py:factory"]), as --pass; grad: "off",
    "no-grad" or "inference", what the calls run inside, as --grad; weights: an hf: checkpoint's
    ("auto" or "random"), as --weights.
    Bad input raises compilekit.model.errors.UserError with the message the CLI would print.
    """
    from compilekit.usercell import make_cell, run_cell

    assignments = [f"{key}={value!r}" for key, value in (config or {}).items()]
    cell = make_cell(
        variant,
        mode,
        shape,
        dtype,
        device,
        seed,
        assignments,
        passes or (),
        timeout_s,
        grad,
        weights,
    )
    return run_cell(cell, out, fresh=fresh, timeout_s=timeout_s)


def load(run_dir: str):
    """A run directory's CellResult (result.json); CorruptFile names the file if unreadable."""
    from compilekit.model import result

    return result.load(run_dir)


def profile(
    out_dir: str | None = None,
    device: str | None = None,
    forwards: int = 1,
    lines: bool = False,
    grad: str = "off",
):
    """Profile a block of the user's code as written (compilekit/userprofile.py): `with
    compilekit.profile() as p: model(**inputs)`, then p.table(by="time" or "memory"), p.ops,
    p.kernels; `forwards=n` where the block runs n passes; `lines=True` (eager code) charges
    each kernel to the block's line that launched it (p.lines); `grad="no-grad"` or
    `"inference"` runs the block inside torch.no_grad() or torch.inference_mode()."""
    from compilekit.userprofile import profile as _profile

    return _profile(out_dir, device, forwards, lines, grad)
