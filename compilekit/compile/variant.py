"""Resolve a variant spec (registry name or `path/to/file.py:callable`) to something callable."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import importlib
import importlib.util
import inspect
import os
import sys
from collections.abc import Callable

from compilekit.compile.closure import closure_hash, import_closure
from compilekit.compile.modes import MODES
from compilekit.model.errors import UserError
from compilekit.model.spec import HF, hf_parts
from compilekit.variants import MODELS, VARIANTS, VARLEN
from compilekit.variants import __path__ as _variants_path

# where the built-in variants' files lie: variants/ in a checkout, compilekit/variants installed
VARIANTS_DIR = os.path.abspath(_variants_path[0])


@dataclasses.dataclass
class Variant:
    name: str
    attention: Callable
    reference: Callable | None  # float64 truth; None means "use the built-in causal reference"
    description: str
    source_file: str
    builtin: bool
    flops: Callable | None = None  # flops(shape) -> float, as the variant declares them
    # mode -> why: a known limitation of torch's under that mode, which turns a failure of the
    # cell in that mode into `unsupported` with this reason (a cell that passes stays `ok`)
    known_limits: dict = dataclasses.field(default_factory=dict)
    # a model workload: factory(shape, dtype, device) -> Workload (measure/workload.py); its
    # model becomes `attention` (the callable compiled and timed) once built for a cell
    factory: Callable | None = None
    workload: object = None
    session: object = None  # a decode cell's (measure/decode/session.py)

    @property
    def has_reference(self) -> bool:
        """Built-ins and workloads (their model in float64) are checked against a float64
        reference; a user variant only if its file defines `reference` (else against itself
        on float64 inputs)."""
        return self.builtin or self.reference is not None or self.factory is not None

    def source_files(self) -> list[str]:
        """The variant's file and every project file it imports, directly or not: the files
        whose edits change what gets compiled (and the cache key covers)."""
        return import_closure(self.source_file)


HF_MODULE = "compilekit.variants.hf"  # hf:<checkpoint> (model/spec.py's HF, hf_parts)


def source_file(spec: str) -> str:
    """The file that defines a variant, found without importing it (a user's file as given)."""
    if is_user_spec(spec):
        return os.path.abspath(spec.rsplit(":", 1)[0])
    if spec.startswith(HF):
        return os.path.abspath(importlib.util.find_spec(HF_MODULE).origin)
    name = model_name(spec)
    found = importlib.util.find_spec(MODELS[name] if name else {**VARIANTS, **VARLEN}[spec])
    return os.path.abspath(found.origin)


def source_hash(spec: str) -> str:
    """Hash of a variant's import closure, without importing it (so the parent process of a
    cell never pays for importing torch); a model's with the attention plugged into it."""
    digest = closure_hash(source_file(spec))
    attention = spec.split("@", 1)[1] if model_name(spec) and "@" in spec else ""
    if spec.startswith(HF):  # the checkpoint's config shapes the compile
        where, attention = hf_parts(spec)
        config = os.path.join(os.path.expanduser(where), "config.json")
        text = open(config, "rb").read() if os.path.isfile(config) else where.encode()
        digest = hashlib.sha256(digest.encode() + text).hexdigest()[:16]
    if attention in VARIANTS or is_user_spec(attention):
        digest = hashlib.sha256((digest + source_hash(attention)).encode()).hexdigest()[:16]
    return digest


def check_variant(spec: str, import_timeout_s: float | None = None) -> bool:
    """UserError unless spec names a registered variant or model, or a user file's callable;
    True for a model workload (its shapes are BxS). A registry name is checked without
    importing it; a user file is imported (its callable must exist), within import_timeout_s
    (the cell's timeout) when given."""
    if is_user_spec(spec):
        return _load_user_variant(spec, import_timeout_s).factory is not None
    if spec.startswith(HF):
        _load_hf(spec)  # its config read: a missing folder or an unknown architecture
        return True
    if model_name(spec) and "@" in spec:
        load_variant(spec)  # the attention named after @ must exist and fit the model
    elif spec not in VARIANTS and spec not in VARLEN and not model_name(spec):
        load_variant(spec)  # raises the registry's UserError with the list of names
    return model_name(spec) is not None or spec in VARLEN


def _unknown(spec: str) -> str:
    """The line for a variant nobody registered: a folder or a file given bare gets the
    spelling that measures it, anything else the list of names."""
    path = spec.split("@", 1)[0]
    if os.path.isdir(path):
        return f"{path!r} is a folder: give it as hf:{spec} to measure the checkpoint in it"
    if path.endswith(".py") and os.path.isfile(path):
        return f"{path!r} is a file: name its callable, {path}:my_attention (or :my_model)"
    return (
        f"unknown variant {spec!r}: choose one of {', '.join(VARIANTS)}, a varlen variant "
        f"({', '.join(VARLEN)}), a model ({', '.join(MODELS)}), hf:path/to/checkpoint or "
        "path/to/file.py:callable"
    )


def is_user_spec(spec: str) -> bool:
    """`path/to/file.py:callable` (a model's `name@file.py:fn` is the model's spec)."""
    path = spec.split(":", 1)[0]
    return ":" in spec and path.endswith(".py") and "@" not in path


def load_variant(spec: str, weights: str = "auto") -> Variant:
    """Import a variant; unknown names, missing files and missing callables raise UserError.
    weights: an hf: checkpoint's ("auto": its own where it has them; "random")."""
    if is_user_spec(spec):
        return _load_user_variant(spec)
    if spec.startswith(HF):
        return _load_hf(spec, weights)
    if model_name(spec):
        return _load_model(spec)
    if spec in VARLEN:
        module = importlib.import_module(VARLEN[spec])
        return _workload_variant(spec, module.workload, module, inspect.getfile(module), True)
    if spec not in VARIANTS:
        raise UserError(_unknown(spec))
    module = importlib.import_module(VARIANTS[spec])
    return Variant(
        spec,
        module.attention,
        getattr(module, "reference", None),
        getattr(module, "DESCRIPTION", ""),
        inspect.getfile(module),
        True,
        getattr(module, "flops", None),
        known_limits(module, VARIANTS[spec]),
    )


def model_name(spec: str) -> str | None:
    """The registered model a spec names (`bert-base`, `llama-block@triton-flash`), or None."""
    name = spec.split("@", 1)[0]
    return name if name in MODELS and not is_user_spec(spec) else None


def _load_model(spec: str) -> Variant:
    """A built-in model workload (variants.MODELS), with `@attention` after its name: one of
    transformers' own implementations the model offers (its ATTENTION), or a compilekit
    attention variant plugged in through transformers' AttentionInterface. transformers is
    the `models` extra."""
    name, _, attention = spec.partition("@")
    try:
        module = importlib.import_module(MODELS[name])
    except ImportError as exc:
        raise UserError(
            f"model {name!r} needs {exc.name or 'transformers'}: pip install 'compilekit[models]'"
        ) from None
    factory = module.workload
    if attention:
        causal = getattr(module, "CAUSAL", False)
        factory = functools.partial(
            factory, attention=_attention_for(name, module, attention, causal)
        )
    return _workload_variant(spec, factory, module, inspect.getfile(module), True)


def _load_hf(spec: str, weights: str = "auto") -> Variant:
    """Any transformers checkpoint (variants/hf.py), its config read here: a missing folder, a
    folder without config.json, an architecture transformers does not know or a hub id out of
    reach is a UserError before anything runs."""
    try:
        module = importlib.import_module(HF_MODULE)
    except ImportError as exc:
        raise UserError(
            f"{spec!r} needs {exc.name or 'transformers'}: pip install 'compilekit[models]'"
        ) from None
    where, attention = hf_parts(spec)
    config = module.config_of(where)
    factory = functools.partial(module.workload, where=where, weights=weights)
    if attention:
        plugged = _attention_for(spec, module, attention, module.causal(config))
        factory = functools.partial(factory, attention=plugged)
    variant = _workload_variant(spec, factory, module, inspect.getfile(module), True)
    variant.description = f"{config.model_type} from {where}"
    return variant


def _attention_for(name: str, module, attention: str, causal: bool) -> str:
    """The attention implementation to give the model's config: transformers' own name, or a
    compilekit variant registered under `compilekit:<variant>`."""
    if attention in module.ATTENTION:
        return attention
    if not causal:
        raise UserError(
            f"{name!r} attends both ways, and compilekit's attention variants are causal: "
            f"choose one of its own ({', '.join(module.ATTENTION)})"
        )
    try:
        variant = load_variant(attention)
    except UserError as unknown:  # name the model's own choices first
        raise UserError(
            f"{name!r} takes one of its own attentions ({', '.join(module.ATTENTION)}) or "
            f"a compilekit attention variant after '@', not {attention!r}: {unknown}"
        ) from None
    if variant.factory is not None:
        raise UserError(f"{attention!r} is a model, not an attention to plug into {name!r}")
    from compilekit.variants.models import plug_in, plugged_name

    # over a static KV cache (decode) the variant's own cached path, where its module has one
    cached = getattr(inspect.getmodule(variant.attention), "cached_attention", None)
    plug_in(plugged_name(attention), variant.attention, cached)
    return plugged_name(attention)


def _workload_variant(spec, factory, module, source: str, builtin: bool) -> Variant:
    description = getattr(module, "DESCRIPTION", "") or (module.__doc__ or "").strip()
    return Variant(
        spec,
        None,
        None,
        description.split("\n")[0],
        source,
        builtin,
        None,
        known_limits(module, source),
        factory=factory,
    )


def is_factory(fn) -> bool:
    """A user's callable is a workload factory when its first parameter is named `shape`
    (an attention function takes q, k, v)."""
    try:
        params = list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return False
    return bool(params) and params[0] == "shape"


def _run_module(loader, module, path: str, timeout_s: float | None) -> None:
    """Execute a user's module, within timeout_s when given: an import that hangs is then a
    UserError at the timeout (the thread left behind is a daemon; the process ends on the
    error), not a wait the cell's --timeout does not cover."""
    if timeout_s is None:
        loader.exec_module(module)
        return
    import threading

    raised: list[BaseException] = []

    def run():
        try:
            loader.exec_module(module)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            raised.append(exc)

    worker = threading.Thread(target=run, name="compilekit-variant-import", daemon=True)
    worker.start()
    worker.join(timeout_s)
    if worker.is_alive():
        raise UserError(
            f"variant file {path!r} was still importing after {timeout_s:g} s (the cell's "
            "timeout): keep slow work out of its top level, or raise --timeout"
        )
    if raised:
        raise raised[0]


def _load_user_variant(spec: str, import_timeout_s: float | None = None) -> Variant:
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
        _run_module(module_spec.loader, module, path, import_timeout_s)
    except UserError:
        raise
    except SystemExit as exc:  # sys.exit() at import would end compilekit without a word
        raise UserError(
            f"variant file {path!r} called sys.exit({exc.code!r}) while being imported: "
            "keep top-level code free of exits (put it under `if __name__ == '__main__':`)"
        ) from None
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
    if is_factory(fn):  # its workloads are checked against their own model in float64
        return _workload_variant(spec, fn, module, os.path.abspath(path), False)
    # Without a reference of its own, a user's variant is checked against itself on float64
    # inputs: `has_reference` False makes that cell "self-consistent" at best, never "ok".
    return Variant(
        spec,
        fn,
        getattr(module, "reference", None),
        (module.__doc__ or "").strip().split("\n")[0],
        os.path.abspath(path),
        False,
        getattr(module, "flops", None),
        known_limits(module, path),
    )


def known_limits(module, where: str) -> dict:
    """The module's KNOWN_LIMITS ({mode: why}), checked: a typo in a mode name would otherwise
    never match and the failure it was meant to explain would stay "failed"."""
    limits = getattr(module, "KNOWN_LIMITS", {})
    bad = not isinstance(limits, dict) or any(
        mode not in MODES or not isinstance(why, str) or not why for mode, why in limits.items()
    )
    if bad:
        raise UserError(
            f"KNOWN_LIMITS in {where} must map mode names ({', '.join(MODES)}) to a sentence "
            f"saying why that mode fails: got {limits!r}"
        )
    return dict(limits)


def describe_all() -> list[tuple[str, str]]:
    """(name, description) for every registered variant."""
    return (
        [(name, load_variant(name).description) for name in VARIANTS]
        + [(name, _model_description(name)) for name in (*VARLEN, *MODELS)]
        + [(f"{HF}<checkpoint>", _model_description(HF))]
    )


def _model_description(name: str) -> str:
    """A model's DESCRIPTION, read without importing it (transformers is optional)."""
    import ast

    tree = ast.parse(open(source_file(name)).read())
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "DESCRIPTION":
            return ast.literal_eval(node.value)
    return ""
