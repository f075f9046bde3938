"""Can a built-in model fit on its device at all? Its parameters are counted on the meta device
(nothing allocated), with the float copy its check makes of them, against the device's whole
memory. A model that cannot fit is refused in one line before its weights exist, where it
would otherwise be killed mid-build without a word (the kernel's out-of-memory killer on a
CPU). One that fits only barely is left to run: out of memory then says so itself."""

from __future__ import annotations

import os

from compilekit.model.errors import Unsupported
from compilekit.model.spec import Decode

GIB = 2**30


def check(factory, spec: str, shape, dtype: str, device: str) -> None:
    """Unsupported where spec's weights, with its check's float copy, exceed the device's memory;
    nothing where they fit or cannot be counted (a factory that does not build on meta)."""
    import torch

    try:
        made = factory(shape, dtype, "meta")
    except Exception:  # no estimate: the real build says what is wrong, if anything
        return
    model = getattr(made, "fn", None)  # a built-in returns a Workload
    if not isinstance(model, torch.nn.Module):
        return
    params = sum(p.numel() for p in model.parameters())
    need, parts = needed(params, dtype, decode=isinstance(shape, Decode))
    have, where = capacity(device)
    if have is not None and need > have:
        raise Unsupported(
            f"{spec!r} cannot run on {device} {dtype} at {shape}: it needs at least "
            f"{need / GIB:.1f} GiB ({parts}) and {where} has {have / GIB:.1f} GiB; run it "
            "where memory is larger, or give a smaller config through a factory of your own "
            "(docs/models.md)"
        )


def needed(params: int, dtype: str, decode: bool) -> tuple[int, str]:
    """(bytes, what they are) a model of `params` parameters holds at its peak in a cell: its
    weights in dtype, and the check's float copy. A forward is checked against a float64 deep
    copy beside the weights; a decode converts the weights in place (to float32, float64 for a
    float32 cell: compilekit/launch/decodephase.py), so its peak is the larger of the two."""
    import torch

    own = params * torch.empty((), dtype=getattr(torch, dtype)).element_size()
    weights = f"{params / 1e9:.2f} B parameters: {own / GIB:.1f} GiB in {dtype}"
    if decode:
        ref = "float64" if dtype in ("float32", "float64") else "float32"
        copy = params * (8 if ref == "float64" else 4)
        return max(own, copy), f"{weights}, {copy / GIB:.1f} GiB once its check makes them {ref}"
    copy = params * 8
    return own + copy, f"{weights}, and {copy / GIB:.1f} GiB more for its float64 check"


def capacity(device: str) -> tuple[int | None, str]:
    """(bytes, its name) of the device's whole memory: the GPU's, or the host's RAM within any
    container limit (cgroup v2 or v1); None where it cannot be read. Imports torch only for a
    GPU: a cell's parent process names the host's memory without it."""
    if device.startswith("cuda"):
        import torch

        return torch.cuda.get_device_properties(torch.device(device)).total_memory, "the GPU"
    sizes = [_ram_total()]
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            with open(path) as f:
                text = f.read().strip()
        except OSError:
            continue
        if text.isdigit():  # "max" (v2) is no limit; v1 writes a huge number instead
            sizes.append(int(text))
    sizes = [s for s in sizes if s]
    return (min(sizes), "this machine") if sizes else (None, "")


def _ram_total() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):  # no sysconf (Windows), or not these names
        return None
