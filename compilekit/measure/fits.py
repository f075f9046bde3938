"""Can a built-in model fit on its device at all, and where does its check's float copy go?

Before a built-in's weights exist, its parameters are counted on the meta device (nothing
allocated), with the float copy its check makes of them, against the device's whole memory. A
model that cannot fit is refused in one line, where it would otherwise be killed mid-build
without a word (the kernel's out-of-memory killer on a CPU). One that fits only barely is left
to run: out of memory then says so itself.

On a GPU the check's copy goes to the host where the GPU has no room for it beside the weights
(`reference_device`): a 7B model in bf16 times on a 24 GiB GPU, and is checked, slower, against
its float32 copy in the host's memory.
"""

from __future__ import annotations

import os

from compilekit.model.errors import Unsupported
from compilekit.model.spec import Decode

GIB = 2**30
# the copy's own activations and the allocator's rounding, beside the copy's weights
HEADROOM = 1.1


def check(factory, spec: str, shape, dtype: str, device: str) -> None:
    """Unsupported where spec's weights, or the check's float copy of them, fit neither its
    device nor (for a GPU cell's copy) the host; nothing where they fit or cannot be counted (a
    factory that does not build on meta)."""
    import torch

    try:
        made = factory(shape, dtype, "meta")
    except Exception:  # no estimate: the real build says what is wrong, if anything
        return
    model = getattr(made, "fn", None)  # a built-in returns a Workload
    if not isinstance(model, torch.nn.Module):
        return
    params = sum(p.numel() for p in model.parameters())
    own, copy, ref = sizes(params, dtype, decode=isinstance(shape, Decode))
    weights = f"{params / 1e9:.2f} B parameters: {own / GIB:.1f} GiB in {dtype}"
    # a forward's copy sits beside the weights; a decode converts its weights in place
    need = max(own, copy) if isinstance(shape, Decode) else own + copy
    have, where = capacity(device)
    if have is None or need <= have:
        return
    host, _ = capacity("cpu") if device.startswith("cuda") else (None, "")
    if own <= have and host is not None and copy <= host:
        return  # checked on the host (reference_device)
    parts = (
        f"{weights}, {copy / GIB:.1f} GiB once its check makes them {ref}"
        if isinstance(shape, Decode)
        else f"{weights}, and {copy / GIB:.1f} GiB more for its {ref} check"
    )
    elsewhere = (
        f", and the check's copy does not fit this machine's {host / GIB:.1f} GiB either"
        if host is not None and own <= have
        else ""
    )
    raise Unsupported(
        f"{spec!r} cannot run on {device} {dtype} at {shape}: it needs at least "
        f"{need / GIB:.1f} GiB ({parts}) and {where} has {have / GIB:.1f} GiB{elsewhere}; run "
        "it where memory is larger, or give a smaller config through a factory of your own "
        "(docs/models.md)"
    )


def reference_dtype(dtype: str, decode: bool) -> str:
    """The dtype of the check's copy: a forward's is float64; a decode's float32, float64 for
    a float32 cell (compilekit/launch/decodephase.py)."""
    if decode and dtype not in ("float32", "float64"):
        return "float32"
    return "float64"


def sizes(params: int, dtype: str, decode: bool) -> tuple[int, int, str]:
    """(bytes of the weights in dtype, bytes of the check's float copy, the copy's dtype) of a
    model of `params` parameters."""
    import torch

    ref = reference_dtype(dtype, decode)
    own = params * torch.empty((), dtype=getattr(torch, dtype)).element_size()
    return own, params * torch.empty((), dtype=getattr(torch, ref)).element_size(), ref


def float_copy_bytes(model, dtype) -> int:
    """Bytes of model's floating parameters and buffers in dtype, each shared one counted once."""
    import torch

    seen = {id(t): t for t in (*model.parameters(), *model.buffers()) if t.is_floating_point()}
    size = torch.empty((), dtype=dtype).element_size()
    return sum(t.numel() for t in seen.values()) * size


def reference_device(device: str, need: int) -> tuple[str, str]:
    """(where a check's float copy of `need` bytes goes, what to say of it): the cell's device
    where its free memory holds the copy, else the host where the host's free memory does
    (said in the reference's description), else the device (its out-of-memory error then says
    so). A CPU cell's is the host already."""
    if not device.startswith("cuda"):
        return device, ""
    import torch

    free, _ = torch.cuda.mem_get_info(torch.device(device))
    if need * HEADROOM > free:
        torch.cuda.empty_cache()  # blocks the timed calls left cached count once given back
        free, _ = torch.cuda.mem_get_info(torch.device(device))
    if need * HEADROOM <= free:
        return device, ""
    host = ram_available()
    if host is None or need * HEADROOM > host:
        return device, ""
    return "cpu", (
        f", on the host ({need / GIB:.1f} GiB of float copy; the GPU had {free / GIB:.1f} GiB "
        "free)"
    )


def capacity(device: str) -> tuple[int | None, str]:
    """(bytes, its name) of the device's whole memory: the GPU's, or the host's RAM within any
    container limit (cgroup v2 or v1); None where it cannot be read. Imports torch only for a
    GPU: a cell's parent process names the host's memory without it."""
    if device.startswith("cuda"):
        import torch

        return torch.cuda.get_device_properties(torch.device(device)).total_memory, "the GPU"
    sizes = [_ram_total(), *(limit for limit, _ in _cgroup())]
    sizes = [s for s in sizes if s]
    return (min(sizes), "this machine") if sizes else (None, "")


def ram_available() -> int | None:
    """Bytes the host can give now: MemAvailable, within any container limit less its usage."""
    sizes = [limit - used for limit, used in _cgroup() if used is not None]
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    sizes.append(int(line.split()[1]) * 1024)
    except (OSError, ValueError, IndexError):
        pass
    return min(sizes) if sizes else None


def _cgroup() -> list[tuple[int, int | None]]:
    """(limit, usage or None) of the container's memory, cgroup v2 then v1, where set."""
    found = []
    for limit, usage in (
        ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
        (
            "/sys/fs/cgroup/memory/memory.limit_in_bytes",
            "/sys/fs/cgroup/memory/memory.usage_in_bytes",
        ),
    ):
        text = _read(limit)
        if text and text.isdigit():  # "max" (v2) is no limit; v1 writes a huge number instead
            used = _read(usage)
            found.append((int(text), int(used) if used and used.isdigit() else None))
    return found


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def _ram_total() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):  # no sysconf (Windows), or not these names
        return None
