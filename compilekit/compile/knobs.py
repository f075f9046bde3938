"""Inductor knobs per cell: `--set key=value` on the command line, `[configs]` in an experiment;
and compilekit's own (TOOLKIT_OPTIONS: static_inputs), which the toolkit acts on itself.

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

from compilekit.model.errors import UserError
from compilekit.model.spec import path_safe

# Modes a config can act on: Inductor's. eager and the cudagraphs backend do not run Inductor.
INDUCTOR_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
# Inductor's modes that capture CUDA graphs
CUDAGRAPH_INDUCTOR_MODES = ("reduce-overhead", "max-autotune")

# compilekit's own options, beside Inductor's in a config: name -> (type, what it does). Not
# passed to Inductor (inductor_options leaves them out).
TOOLKIT_OPTIONS = {
    "static_inputs": (
        bool,
        "the cell's input tensors marked static (torch._dynamo.mark_static_address): the CUDA "
        "graph reads them in place, as a model's graph reads the tensors it made itself; without "
        "it, the graph copies each input into its own buffer before every replay",
    ),
}


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
        if key in TOOLKIT_OPTIONS:
            kind, _ = TOOLKIT_OPTIONS[key]
            if type(value) is not kind:
                raise UserError(
                    f"{prefix}compilekit option {key!r} takes {kind.__name__}, not "
                    f"{type(value).__name__} {value!r:.60}"
                )
            continue
        if key not in known:
            close = difflib.get_close_matches(key, sorted(known), n=3, cutoff=0.6)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            raise UserError(
                f"{prefix}unknown Inductor option {key!r}{hint} "
                "(torch._inductor.list_options() lists them)"
            )
        default = defaults.get(key)
        if value is None:
            continue
        if default is None:  # nothing to compare with: the option's declared type says
            _check_declared(key, value, prefix)
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


SCALARS = {"int": int, "float": float, "bool": bool, "str": str}


def _declared(key: str) -> tuple[str, list, list] | None:
    """(the option's declared type as text, the scalar types it admits, the values a Literal in
    it admits), or None where torch keeps no declared type for it."""
    import typing

    import torch._inductor.config as inductor_config

    entry = getattr(inductor_config, "_config", {}).get(key)
    declared = getattr(entry, "value_type", None)
    if declared is None:
        return None
    if isinstance(declared, str):  # a forward reference: its names say what it takes
        names = re.findall(r"\b(int|float|bool|str)\b", declared)
        return declared, [SCALARS[n] for n in dict.fromkeys(names)], []
    admits, literals, todo = [], [], [declared]
    while todo:  # through Optional[...] and unions to the scalars and literals inside
        kind = todo.pop()
        if typing.get_origin(kind) is typing.Literal:
            literals += typing.get_args(kind)
        elif typing.get_args(kind):
            todo += typing.get_args(kind)
        elif kind in SCALARS.values():
            admits.append(kind)
    text = str(declared).replace("typing.", "").replace("<class '", "").replace("'>", "")
    return text, admits, literals


def _check_declared(key: str, value, prefix: str) -> None:
    """An option whose default is None: a function or pass object cannot come from --set, and
    a value must be one of the scalar types or literal values the option declares."""
    found = _declared(key)
    text, admits, literals = found if found else ("", [int, float, bool, str], [])
    if "Callable" in text or re.search(r"[A-Z]\w*(Pass|Fn)\b", text):
        raise UserError(
            f"{prefix}Inductor option {key!r} takes a function or an object ({text}), which "
            "a command line cannot carry (a graph pass goes through --pass FILE.py:FACTORY)"
        )
    fits = value in literals or any(
        isinstance(value, t)
        and not (t in (int, float) and isinstance(value, bool))
        or (t is float and isinstance(value, int) and not isinstance(value, bool))
        for t in admits
    )
    if not fits:
        wanted = ", ".join(repr(v) for v in literals) if literals and not admits else text
        raise UserError(
            f"{prefix}Inductor option {key!r} takes {wanted or 'a number, a bool or a string'}, "
            f"not {type(value).__name__} {value!r:.60}"
        )


def name_of(config: dict) -> str:
    """A short, file-system-safe name for an unnamed config (`--set`): its assignments, or a
    hash of them when they are long."""
    text = "_".join(f"{k}={v}" for k, v in sorted(config.items()))
    safe = path_safe(text)
    if len(safe) <= 40:
        return safe
    return safe[:24] + "-" + hashlib.sha1(text.encode()).hexdigest()[:8]


def check_mode(config: dict, mode: str, what: str = "Inductor options") -> None:
    """Configs and graph passes act on Inductor; on eager or the cudagraphs backend they would
    do nothing, and static_inputs does nothing without CUDA graphs."""
    if config and mode not in INDUCTOR_MODES:
        raise UserError(
            f"{what} do nothing under mode {mode!r}: use one of {', '.join(INDUCTOR_MODES)}"
        )
    if config.get("static_inputs") and mode not in CUDAGRAPH_INDUCTOR_MODES:
        raise UserError(
            f"static_inputs spares a CUDA graph its input copies and does nothing under mode "
            f"{mode!r}: use one of {', '.join(CUDAGRAPH_INDUCTOR_MODES)}"
        )


def check_shape(config: dict, shape) -> None:
    """static_inputs holds the cell's inputs in place call after call; a decode step's inputs
    (the next token, its position) are new each step."""
    from compilekit.model.spec import Decode

    if config.get("static_inputs") and isinstance(shape, Decode):
        raise UserError(
            f"static_inputs keeps a cell's inputs in place, and a decode step's are new each "
            f"step: leave it out of decode cells ({shape})"
        )


def inductor_options(config: dict) -> dict:
    """The config's Inductor options: all but compilekit's own (TOOLKIT_OPTIONS)."""
    return {k: v for k, v in config.items() if k not in TOOLKIT_OPTIONS}


def compile_options(mode_kwargs: dict, config: dict) -> dict:
    """torch.compile keyword arguments: the mode's own, or its options merged with the
    config's Inductor options."""
    config = inductor_options(config)
    if not config:
        return mode_kwargs
    import torch._inductor as inductor

    return {
        "options": {**inductor.list_mode_options(mode_kwargs.get("mode") or "default"), **config}
    }
