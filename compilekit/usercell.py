"""A cell from what a user typed (the command line, `compilekit.run`): every field validated,
the per-device defaults filled, `auto` resolved to the device torch can use. Bad input is a
UserError naming the fix, before any process starts."""

from __future__ import annotations

import os

from compilekit.model.errors import UserError
from compilekit.model.spec import (
    HF,
    Cell,
    check_seed,
    check_timeout,
    hf_parts,
    parse_alloc,
    parse_device,
    parse_dtype,
    parse_grad,
    parse_shape,
    parse_weights,
)

DEFAULT_SHAPES = {"cuda": "8x16x1024x64", "cpu": "1x8x512x64"}
MODEL_SHAPES = {"cuda": "8x128", "cpu": "1x128"}  # a model workload's batch x tokens
VARLEN_SHAPES = {"cuda": "lognormal512@16384x32g8x128", "cpu": "100,37,60x4g2x16"}
DEFAULT_DTYPES = {"cuda": "bfloat16", "cpu": "float32"}


def cuda_available() -> bool:
    """What torch.cuda.is_available() says, without importing torch where the answer is certain
    (seconds per run): a CPU build of torch (its version.py names no CUDA version) has none; a
    CUDA build whose driver reports a device (cuInit, cuDeviceGetCount: they honour
    CUDA_VISIBLE_DEVICES as torch does) has one. Anything else asks torch itself."""
    built = _torch_cuda_build()
    if built is False:
        return False
    if built and _driver_device_count() > 0:
        return True
    import torch

    return torch.cuda.is_available()


def _torch_cuda_build() -> bool | None:
    """Whether the installed torch is a CUDA build, read from torch/version.py; None if unknown."""
    import importlib.util
    import re

    spec = importlib.util.find_spec("torch")
    if spec is None or spec.origin is None:
        return None
    try:
        with open(os.path.join(os.path.dirname(spec.origin), "version.py")) as f:
            built = re.search(r"^cuda\b[^=]*=\s*(.+)$", f.read(), re.M)
    except OSError:
        return None
    return None if built is None else built[1].strip() != "None"


def _driver_device_count() -> int:
    """CUDA devices the driver reports (0 without a driver)."""
    import ctypes

    try:
        driver = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return 0
    count = ctypes.c_int(0)
    if driver.cuInit(0) != 0 or driver.cuDeviceGetCount(ctypes.byref(count)) != 0:
        return 0
    return count.value


def resolve_device(name: str) -> str:
    """`auto` -> cuda when there is a GPU torch can use, else cpu; `cuda` without one is a
    user error."""
    name = parse_device(name)
    if name == "auto":
        return "cuda" if cuda_available() else "cpu"
    if name == "cuda" and not cuda_available():
        raise UserError(
            "device 'cuda' asked for but torch sees no CUDA GPU: use DEVICE=cpu (or DEVICE=auto)"
        )
    return name


def absolute_checkpoint(variant: str, base: str | None = None) -> str:
    """An hf: checkpoint's folder made absolute (against base, else the working folder), so
    the cell and its label do not depend on where it was typed; a hub id as it is."""
    if not variant.startswith(HF):
        return variant
    where, attention = hf_parts(variant)
    local = os.path.join(base or "", os.path.expanduser(where))
    if not (os.path.exists(local) or where.startswith((".", "/", "~"))):
        return variant  # a hub id
    return f"{HF}{os.path.abspath(local)}" + (f"@{attention}" if attention else "")


def make_cell(
    variant: str,
    mode: str,
    shape: str | None,
    dtype: str | None,
    device: str,
    seed: int = 0,
    assignments: list[str] | tuple = (),
    passes: list[str] | tuple = (),
    timeout_s: float | None = None,
    grad: str = "off",
    weights: str = "auto",
    alloc: str = "",
) -> Cell:
    """Validate every field a user typed and fill the per-device defaults; `assignments` are
    `key=value` Inductor options (`--set`); a user's variant file must import within
    timeout_s (the cell's); grad: what the calls run inside (spec.GRAD_MODES); weights: an hf:
    checkpoint's own or random ones (spec.WEIGHTS); alloc: the CUDA caching allocator's
    settings for the cell's processes (spec.ALLOC_KEYS)."""
    from compilekit.compile import knobs
    from compilekit.compile.modes import check_mode
    from compilekit.compile.shapekind import check_shape, variant_kind
    from compilekit.compile.variant import check_variant, is_user_spec
    from compilekit.launch.reaper import started_here_ended

    model, at, attention = variant.rpartition("@")
    if is_user_spec(attention):  # absolute, so the cell (and its label) do not depend on the cwd
        path, fn = attention.rsplit(":", 1)
        variant = f"{model}{at}{os.path.abspath(path)}:{fn}"
    variant = absolute_checkpoint(variant)
    parse_weights(weights, variant)
    if timeout_s is not None:
        check_timeout(timeout_s)
    with started_here_ended():  # what the user's file starts as it is imported
        workload = check_variant(variant, timeout_s)
    check_mode(mode)
    check_seed(seed)
    # None takes the device's default; an empty string is a typo, refused by the parsers
    shape_obj = parse_shape(shape) if shape is not None else None
    dtype_name = parse_dtype(dtype) if dtype is not None else None
    device = resolve_device(device)
    alloc = parse_alloc(alloc)
    if alloc and device != "cuda":
        raise UserError(
            f"--alloc {alloc!r} sets the CUDA caching allocator; a {device} cell has none: "
            "drop --alloc, or give --device cuda"
        )
    defaults = {"model": MODEL_SHAPES, "attention": DEFAULT_SHAPES, "varlen": VARLEN_SHAPES}
    shape_obj = shape_obj or parse_shape(defaults[variant_kind(variant, workload)][device])
    check_shape(variant, shape_obj, workload)
    config = dict(knobs.parse_assignment(a) for a in assignments)
    knobs.check_mode(config, mode)
    config = knobs.validate(config, "--set")
    knobs.check_shape(config, shape_obj)
    passes = [
        os.path.abspath(p.rsplit(":", 1)[0]) + ":" + p.rsplit(":", 1)[1] if ":" in p else p
        for p in passes
    ]
    if passes:
        from compilekit.compile.passes import load_pass

        knobs.check_mode({"--pass": passes}, mode, "graph passes (--pass)")
        with started_here_ended():
            for spec in passes:
                load_pass(spec)  # the file, the factory and its interface, before anything runs
    return Cell(
        variant,
        mode,
        shape_obj,
        dtype_name or DEFAULT_DTYPES[device],
        device,
        seed,
        tuple(sorted(config.items())),
        knobs.name_of(config) if config else "",
        tuple(passes),
        parse_grad(grad),
        weights,
        alloc,
    )


def sweep_gpus(text: str | None, devices: set) -> list[str]:
    """The GPUs a local sweep spreads its CUDA cells over: --gpus (CUDA device indices, and
    only for an experiment with CUDA cells), or every GPU torch sees."""
    import re

    if text is not None and not re.fullmatch(r"\s*\d+\s*(,\s*\d+\s*)*", text):
        raise UserError(f"--gpus {text!r}: give CUDA device indices, e.g. --gpus 0,1")
    if text is not None and "cuda" not in devices:
        raise UserError(
            f"--gpus {text!r} given, but this experiment has no CUDA cells (device "
            f"{', '.join(sorted(devices))}): drop --gpus"
        )
    import torch

    available = [str(i) for i in range(torch.cuda.device_count())]
    gpus = [g.strip() for g in text.split(",") if g.strip()] if text else available
    unknown = [g for g in gpus if g not in available]
    if unknown:
        masked = os.environ.get("CUDA_VISIBLE_DEVICES")
        raise UserError(
            f"GPUs {','.join(unknown)} not visible (torch sees "
            f"{'GPUs ' + ','.join(available) if available else 'no GPU'}"
            f"{f', under CUDA_VISIBLE_DEVICES={masked}' if masked is not None else ''}): "
            "set GPUS= to some of those"
        )
    return gpus


def run_cell(cell, out_dir: str, **launch_args):
    """runner.launch, then the run's page (index.html, a view of what is saved) where the run
    took its place (a failed rerun kept in attempts/ leaves the good run and its page)."""
    from compilekit.launch import runner
    from compilekit.report.pages import run_page, write_quietly

    result = runner.launch(cell, out_dir, **launch_args)
    if result.run_dir == os.path.join(out_dir, cell.label()):
        write_quietly(run_page, result.run_dir)
    return result
