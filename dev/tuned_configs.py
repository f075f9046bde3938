"""The launch config Inductor's autotuning settled on for each Triton kernel loaded in this
process (block sizes, warps, stages; registers and spills where known), read from the loaded
kernels' autotuners: a lab helper for dev/decode_pdl.py and dev/gemv_read.py, to set one
kernel's config in a loop beside the same kernel's alone."""

from __future__ import annotations


def loaded_modules() -> list:
    """The Python modules of Inductor's output code loaded in this process."""
    try:
        from torch._inductor.codecache import PyCodeCache
    except ImportError:
        return []
    modules = list(getattr(PyCodeCache, "modules", []))
    for table in ("modules_no_attr", "cache"):  # where other torch versions keep them
        modules += list(getattr(PyCodeCache, table, {}).values())
    return modules


def tuned_configs(skip=frozenset()) -> dict[str, str]:
    """{kernel name: its chosen config} for every Triton kernel Inductor loaded and ran in this
    process (one launcher left after tuning), but those of modules whose id() is in `skip`
    (loaded before: a name can recur in a later compile with another config)."""
    try:
        from torch._inductor.runtime.triton_heuristics import CachingAutotuner
    except ImportError:
        return {}
    found = {}
    try:
        _read_into(found, skip, CachingAutotuner)
    except Exception as exc:  # a lab helper's failure must not cost the figures beside it
        found["(not read)"] = f"{type(exc).__name__}: {exc}"
    return found


def _read_into(found: dict, skip, autotuner_class) -> None:
    for module in loaded_modules():
        if id(module) in skip:
            continue
        for name, obj in vars(module).items():
            if not isinstance(obj, autotuner_class) or len(obj.launchers) != 1:
                continue
            launcher = obj.launchers[0]
            config = launcher.config
            text = ", ".join(f"{k}={v}" for k, v in config.kwargs.items())
            text += f", warps={config.num_warps}, stages={config.num_stages}"
            regs = getattr(launcher, "n_regs", None)
            if regs is not None:
                text += f", regs={regs}, spills={getattr(launcher, 'n_spills', '?')}"
            found[name] = text
