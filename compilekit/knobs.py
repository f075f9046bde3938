"""Inductor knobs per cell: `--set key=value` on the command line, `[configs]` in an experiment.

A config is a flat {Inductor config key: value} dict. It is validated against the running torch
(`torch._inductor.list_options()` and the type of each key's current value), carried by the cell
(its run directory name and its cache key), passed to `torch.compile(options=...)` merged with the
mode's own options (torch takes `mode` or `options`, not both), and also set in the cell's
processes for the knobs Inductor reads at run time (some cudagraph ones). result.json records it.
"""

from __future__ import annotations

import ast
import difflib
import hashlib
import re

from compilekit.errors import UserError

# Modes a config can act on: Inductor's. eager and the cudagraphs backend do not run Inductor.
INDUCTOR_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


def parse_assignment(text: str) -> tuple[str, object]:
    """`key=value` -> (key, value); the value read as a Python literal (true/false too), else
    kept as a string (`max_autotune_gemm_backends=TRITON`)."""
    if "=" not in text:
        raise UserError(
            f"--set {text!r}: write key=value, e.g. --set coordinate_descent_tuning=true"
        )
    key, raw = (part.strip() for part in text.split("=", 1))
    words = {"true": True, "false": False, "none": None}
    if raw.lower() in words:
        return key, words[raw.lower()]
    try:
        return key, ast.literal_eval(raw)
    except (ValueError, SyntaxError):
        return key, raw


def validate(config: dict, where: str = "") -> dict:
    """The config, checked against the running torch: an unknown key (with the closest names)
    or a value of another type than the key's default is a UserError."""
    if not config:
        return {}
    import torch._inductor as inductor
    import torch._inductor.config as inductor_config

    known = set(inductor.list_options())
    defaults = inductor_config.get_config_copy()
    prefix = f"{where}: " if where else ""
    for key, value in config.items():
        if key not in known:
            close = difflib.get_close_matches(key, sorted(known), n=3, cutoff=0.6)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            raise UserError(
                f"{prefix}unknown Inductor option {key!r}{hint} "
                "(torch._inductor.list_options() lists them)"
            )
        default = defaults.get(key)
        if default is None or value is None:
            continue
        expected = type(default)
        ok = isinstance(value, expected) and not (expected is int and isinstance(value, bool))
        if expected is float and isinstance(value, int) and not isinstance(value, bool):
            ok = True
        if not ok:
            raise UserError(
                f"{prefix}Inductor option {key!r} takes {expected.__name__} (default "
                f"{default!r}), not {type(value).__name__} {value!r}"
            )
    return dict(config)


def name_of(config: dict) -> str:
    """A short, file-system-safe name for an unnamed config (`--set`): its assignments, or a
    hash of them when they are long."""
    text = "_".join(f"{k}={v}" for k, v in sorted(config.items()))
    safe = re.sub(r"[^A-Za-z0-9_.=-]+", "_", text)
    if len(safe) <= 40:
        return safe
    return safe[:24] + "-" + hashlib.sha1(text.encode()).hexdigest()[:8]


def check_mode(config: dict, mode: str) -> None:
    """Configs act on Inductor; on eager or the cudagraphs backend they would do nothing."""
    if config and mode not in INDUCTOR_MODES:
        raise UserError(
            f"Inductor options do nothing under mode {mode!r}: use one of "
            f"{', '.join(INDUCTOR_MODES)}"
        )


def compile_options(mode_kwargs: dict, config: dict) -> dict:
    """torch.compile keyword arguments: the mode's own, or its options merged with the config."""
    if not config:
        return mode_kwargs
    import torch._inductor as inductor

    return {
        "options": {**inductor.list_mode_options(mode_kwargs.get("mode") or "default"), **config}
    }
