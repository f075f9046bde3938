"""What a hand-written Triton kernel's @triton.autotune chose in this process: the config per
key of each autotuner in the variants' own modules (not torch's or Triton's). Its first eager
call times the configs, and the cell's figures are those of the winner: another winner (a
timing disturbed, another GPU) is another kernel. Inductor's own tuning is max-autotune's
record (result.autotune)."""

from __future__ import annotations

import os
import sys
import sysconfig

from compilekit.compile.variant import VARIANTS_DIR

# where installed packages live: their autotuners are not the variant's (but compilekit's own
# variants, which an install puts there too)
_INSTALLED = tuple(
    os.path.realpath(p) + os.sep
    for p in {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
)


def autotuners() -> list[tuple[str, object]]:
    """(module name, autotuner) for each Triton autotuner in the modules loaded from outside
    the installed packages (the variants' code, a user's file); [] without Triton."""
    autotuner = _autotuner_class()
    if autotuner is None:
        return []
    found = []
    for name, module in list(sys.modules.items()):
        path = os.path.realpath(getattr(module, "__file__", None) or os.sep)
        ours = path.startswith(os.path.realpath(VARIANTS_DIR) + os.sep)
        if (path.startswith(_INSTALLED) and not ours) or path == os.sep:
            continue
        found += [
            (name, value)
            for value in list(getattr(module, "__dict__", {}).values())
            if type(value) is autotuner
        ]
    return found


def choices() -> list[dict]:
    """[{"kernel", "module", "keys", "chosen": [{"key", "config"}]}] for each autotuner (of
    autotuners()) that has chosen a config."""
    return [
        {
            "kernel": kernel_name(tuner),
            "module": name,
            "keys": list(getattr(tuner, "keys", [])),
            "chosen": chosen,
        }
        for name, tuner in autotuners()
        if (chosen := _chosen(tuner))
    ]


def kernel_name(tuner) -> str:
    """The name of the kernel an autotuner tunes."""
    kernel = getattr(tuner, "base_fn", tuner.fn)
    return getattr(kernel, "__name__", repr(kernel))


def lines(records: list | None) -> list[str]:
    """One line per key an autotuner chose a config for."""
    return [
        f"autotuned {r['kernel']} ({r['module']}) at {_key(c['key'], r['keys'])}: {c['config']}"
        for r in records or []
        for c in r["chosen"]
    ]


def _chosen(tuner) -> list[dict]:
    """The config per key the tuner timed (its cache), or the one config it runs where it
    had nothing to choose between (a single config: no key is timed)."""
    cache = getattr(tuner, "cache", None) or {}
    if cache:
        return [{"key": [str(k) for k in key], "config": str(cfg)} for key, cfg in cache.items()]
    best = getattr(tuner, "best_config", None)
    return [{"key": None, "config": str(best)}] if best is not None else []


def _key(key: list | None, names: list) -> str:
    if key is None:
        return "every key (one config)"
    named = [f"{n}={v}" for n, v in zip(names, key)] + key[len(names) :]
    return ", ".join(named)


def _autotuner_class():
    try:
        from triton.runtime.autotuner import Autotuner
    except ImportError:  # CPU builds of torch come without Triton
        return None
    return Autotuner
