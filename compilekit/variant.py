"""Resolve a variant spec (registry name or `path/to/file.py:callable`) to something callable."""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import importlib.util
import inspect
import os
import sys
from typing import Callable

from compilekit.spec import UserError
from variants import VARIANTS


@dataclasses.dataclass
class Variant:
    name: str
    attention: Callable
    reference: Callable | None  # float64 truth; None means "use the built-in causal reference"
    description: str
    source_file: str
    builtin: bool

    def source_hash(self) -> str:
        """Hash of the file that defines the variant, so edits invalidate cached compiles."""
        with open(self.source_file, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()[:16]


def is_user_spec(spec: str) -> bool:
    return ":" in spec and spec.split(":", 1)[0].endswith(".py")


def load_variant(spec: str) -> Variant:
    """Import a variant; unknown names, missing files and missing callables raise UserError."""
    if is_user_spec(spec):
        return _load_user_variant(spec)
    if spec not in VARIANTS:
        raise UserError(
            f"unknown variant {spec!r}: choose one of {', '.join(VARIANTS)} "
            "or give path/to/file.py:callable"
        )
    module = importlib.import_module(VARIANTS[spec])
    return Variant(
        spec,
        module.attention,
        getattr(module, "reference", None),
        getattr(module, "DESCRIPTION", ""),
        inspect.getfile(module),
        True,
    )


def _load_user_variant(spec: str) -> Variant:
    path, name = spec.rsplit(":", 1)
    if not os.path.isfile(path):
        raise UserError(
            f"variant file {path!r} not found: give an existing path/to/file.py:callable"
        )
    module_name = "compilekit_user_" + hashlib.sha1(os.path.abspath(path).encode()).hexdigest()[:8]
    module_spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[module_name] = module  # dataclasses, pickling and dynamo want it importable
    try:
        module_spec.loader.exec_module(module)
    except Exception as exc:  # the user's file: report it, never a traceback
        raise UserError(
            f"variant file {path!r} failed to import ({type(exc).__name__}: {exc}): fix the file"
        ) from None
    fn = getattr(module, name, None)
    if not callable(fn):
        found = sorted(
            n
            for n, v in vars(module).items()
            if callable(v)
            and not n.startswith("_")
            and getattr(v, "__module__", "") == module_name
        )
        raise UserError(
            f"no callable {name!r} in {path}: choose one of {', '.join(found) or '(none)'}"
        )
    # Without a reference of its own, a user's variant is checked against itself on float64 inputs.
    reference = getattr(module, "reference", None) or fn
    return Variant(
        spec,
        fn,
        reference,
        (module.__doc__ or "").strip().split("\n")[0],
        os.path.abspath(path),
        False,
    )


def describe_all() -> list[tuple[str, str]]:
    """(name, description) for every registered variant."""
    return [(name, load_variant(name).description) for name in VARIANTS]
