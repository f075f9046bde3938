"""An experiment from the TOML file a user wrote: its matrices of cells, read, checked and
expanded into a compilekit.model.experiment.Experiment.

Everything in the file is checked before any process starts: a key of the wrong type, an
unknown variant or mode, a config Inductor does not know, an [against] baseline the experiment
never measures, or more cells than one experiment may hold is one line naming the place.
"""

from __future__ import annotations

import itertools
import json
import os
import re

from compilekit.compile.knobs import INDUCTOR_MODES
from compilekit.compile.knobs import check_mode as check_config_mode
from compilekit.compile.knobs import check_shape as check_config_shape
from compilekit.compile.shapekind import check_shape, fits
from compilekit.model.errors import UserError
from compilekit.model.experiment import SAME_MODE, Experiment, parse_baseline
from compilekit.model.spec import (
    Cell,
    check_seed,
    parse_alloc,
    parse_device,
    parse_dtype,
    parse_grad,
    parse_shape,
    parse_weights,
    path_safe,
)

# The most cells one experiment may hold.
MAX_CELLS = 10_000

EXPERIMENT_KEYS = {
    "name": str,
    "description": str,
    "variants": list,
    "modes": list,
    "shapes": list,
    "dtype": str,
    "device": str,
    "seed": int,
    "timeout_s": (int, float),
    "matrix": list,
    "configs": dict,
    "passes": list,
    "against": dict,
    "per_gpu": int,
    "grads": list,
    "weights": str,
    "allocs": list,
}
MATRIX_KEYS = {
    "variants", "modes", "shapes", "dtype", "device", "seed", "timeout_s", "note", "passes",
    "per_gpu", "grads", "weights", "allocs",
}  # fmt: skip
# in a [[matrix]] table, `configs` names which of the top-level [configs] it sweeps


def _where(text: str, key: str | None = None, value: str | None = None) -> str:
    """`line N` where `key = ...` is set, or where the string value "value" is written."""
    pattern = (
        re.compile(rf"^\s*{re.escape(key)}\s*=")
        if key is not None
        else re.compile(re.escape(json.dumps(value)))
    )
    for number, line in enumerate(text.splitlines(), 1):
        if pattern.search(line):
            return f"line {number}"
    return "somewhere in the file"


def _device(path: str, name: str, resolver) -> str:
    """The matrix's device as the resolver gives it; its refusal names the file's key as the
    fix (a sweep has no DEVICE= to set)."""
    if resolver is None:
        return name
    try:
        return resolver(name)
    except UserError as refused:
        if name != "cuda":
            raise
        raise UserError(
            f'{path}: device = "cuda" but torch sees no CUDA GPU: run it on a GPU machine, '
            'or copy it with device = "cpu" and smaller shapes (experiments/cpu_small.toml '
            "is one)"
        ) from refused


def load_experiment(path: str, device_resolver=None) -> Experiment:
    """Parse and validate an experiment file; every problem is a UserError naming its place."""
    text, data = _read(path)
    configs = _configs(path, text, data.get("configs"))
    base = {k: v for k, v in data.items() if k in MATRIX_KEYS}
    cells, timeouts, limits, seen = [], {}, {}, set()
    for number, group in enumerate(data.get("matrix") or [{}], 1):
        place = f"[[matrix]] #{number}" if "matrix" in data else "top level"
        matrix = _matrix(path, text, "matrix" in data, base, group, place, configs)
        device = _device(path, matrix["device"], device_resolver)
        for cell in _cells(matrix, device):
            if cell in seen:
                continue
            seen.add(cell)
            if cell.label() in timeouts:
                raise UserError(
                    f"{path}: two cells share the run directory {cell.label()!r}: "
                    "rename one of the variants"
                )
            cells.append(cell)
            timeouts[cell.label()] = matrix["timeout_s"]
            if matrix["per_gpu"]:
                limits[cell.label()] = matrix["per_gpu"]
            if len(cells) > MAX_CELLS:
                raise UserError(
                    f"{path}: over {MAX_CELLS:,} cells (at 2-60 s a cell, days of machine "
                    "time): split it into smaller experiments"
                )
    # a name given is checked; one taken from the file's name is made safe
    name = data.get("name") or path_safe(os.path.splitext(os.path.basename(path))[0])[:100]
    if not good_name(name):
        raise UserError(
            f"{path}, {_where(text, key='name')}: name {name!r} must be letters, digits, "
            "_ . , + = @ - (not starting with '.'; it names the output directory)"
        )
    against = _against(path, data.get("against") or {}, cells)
    return Experiment(name, data.get("description", ""), cells, timeouts, path, against, limits)


def _read(path: str) -> tuple[str, dict]:
    """(the file's text, its TOML), its top-level keys and their types checked."""
    import tomllib

    if not os.path.isfile(path):
        raise UserError(
            f"experiment file {path!r} not found: give a TOML file such as "
            "experiments/blog_part3.toml"
        )
    with open(path, "rb") as f:
        text = f.read().decode("utf-8", errors="replace")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"{path}: malformed TOML: {exc}") from None
    for key, value in data.items():
        if key not in EXPERIMENT_KEYS:
            raise UserError(
                f"{path}, {_where(text, key=key)}: unknown key {key!r}: allowed are "
                f"{', '.join(EXPERIMENT_KEYS)}"
            )
        _check_type(path, text, key, value)
    return text, data


def _matrix(path, text, in_matrix: bool, base: dict, group, place: str, configs: dict) -> dict:
    """One matrix (a [[matrix]] table over the top-level values, or the top level alone),
    every value checked: {"configs", "variants", "modes", "shapes", "dtype", "device",
    "seed", "passes", "timeout_s", "per_gpu", "grads", "allocs"}."""
    if not isinstance(group, dict):
        raise UserError(f"{path}: {place} must be a table")
    chosen = configs
    if in_matrix and "configs" in group:
        names = group["configs"]
        if not isinstance(names, list) or not all(n in configs for n in names) or not names:
            raise UserError(
                f"{path}, {_where(text, key='configs')}: configs in {place} must list names "
                f"from the [configs] table: {', '.join(configs)}"
            )
        chosen = {n: configs[n] for n in names}
    for key, value in group.items():
        if key == "configs" and in_matrix:
            continue
        if key not in MATRIX_KEYS:
            raise UserError(
                f"{path}, {_where(text, key=key)}: unknown key {key!r} in {place}: "
                f"allowed are {', '.join(sorted(MATRIX_KEYS))}"
            )
        _check_type(path, text, key, value)
    merged = {**base, **group}
    merged["variants"] = [_resolve(variant, path) for variant in merged.get("variants", [])]
    for key in ("variants", "modes", "shapes"):
        if not merged.get(key):
            raise UserError(
                f"{path}, {place} has no {key}: the matrix is empty; list at "
                f"least one in {key} = [...]"
            )
    timeout_s = float(merged.get("timeout_s", 900))
    _check_names(path, text, merged, timeout_s)
    try:
        shapes = [parse_shape(s) for s in merged["shapes"]]
        for variant, workload in merged["workloads"].items():
            if not any(fits(variant, s, workload) for s in shapes):
                check_shape(variant, shapes[0], workload)  # names the kind it takes
        grads = [parse_grad(g) for g in merged.get("grads", ["off"])]  # an axis, as modes
        allocs = [parse_alloc(a) for a in merged.get("allocs", [""])]  # "" the process's own
        weights = merged.get("weights", "auto")
        for variant in merged["variants"]:
            parse_weights(weights, variant)
        dtype = parse_dtype(merged.get("dtype", "float32"))
        device = parse_device(merged.get("device", "auto"))
        for config, mode in itertools.product(chosen.values(), merged["modes"]):
            if mode in INDUCTOR_MODES:  # the others take no config (_cells)
                check_config_mode(config, mode)
        for config, shape in itertools.product(chosen.values(), shapes):
            check_config_shape(config, shape)
    except UserError as exc:
        raise UserError(f"{path}, {place}: {exc}") from None
    return {
        "configs": chosen,
        "variants": merged["variants"],
        "modes": merged["modes"],
        "shapes": shapes,
        "workloads": merged["workloads"],
        "dtype": dtype,
        "device": device,
        "seed": int(merged.get("seed", 0)),
        "passes": tuple(_resolve(spec, path) for spec in merged.get("passes", [])),
        "timeout_s": timeout_s,
        "per_gpu": merged.get("per_gpu"),
        "grads": grads,
        "weights": weights,
        "allocs": allocs,
    }


def _check_names(path: str, text: str, merged: dict, timeout_s: float) -> None:
    """The matrix's variants (imported within the cells' timeout), modes and passes exist;
    each problem names its place in the file."""
    from compilekit.compile.modes import check_mode
    from compilekit.compile.passes import load_pass
    from compilekit.compile.variant import check_variant
    from compilekit.launch.reaper import started_here_ended

    workloads = merged["workloads"] = {}  # variant -> whether it is a model (BxS shapes)

    def check(variant):
        workloads[variant] = check_variant(variant, timeout_s)

    checks = [(v, v, check) for v in merged["variants"]]
    checks += [(m, m, check_mode) for m in merged["modes"]]
    # a pass's file, factory and interface, before any cell
    written = merged.get("passes", [])
    checks += [(w, _resolve(w, path), load_pass) for w in written]
    with started_here_ended():  # what a user's file starts as it is imported
        for shown, value, check in checks:
            try:
                check(value)
            except UserError as exc:
                raise UserError(f"{path}, {_where(text, value=shown)}: {exc}") from None


def _cells(matrix: dict, device: str):
    """The matrix's cells: configs x variants x modes x shapes (eager and the cudagraphs
    backend run no Inductor, so they take no config and no pass)."""
    for (config_name, config), variant, mode, shape, grad, alloc in itertools.product(
        matrix["configs"].items(), matrix["variants"], matrix["modes"], matrix["shapes"],
        matrix["grads"], matrix["allocs"],
    ):  # fmt: skip
        if not fits(variant, shape, matrix["workloads"][variant]):
            continue  # a matrix of models and attention variants: each takes its own shapes
        inductor = mode in INDUCTOR_MODES
        if not inductor:
            config_name, config = "", {}
        yield Cell(
            variant, mode, shape, matrix["dtype"], device, matrix["seed"],
            tuple(sorted(config.items())), config_name if config else "",
            matrix["passes"] if inductor else (), grad, matrix["weights"], alloc,
        )  # fmt: skip


def _against(path: str, table: dict, cells: list) -> dict:
    """The [against] table, its user variants resolved as the matrix's are, then checked
    against the cells (the report's side: compilekit/report/baselines.py)."""

    def resolved(baselines):
        if not isinstance(baselines, list) or not all(isinstance(b, str) for b in baselines):
            return baselines  # check() names the problem
        pairs = map(parse_baseline, baselines)
        return [f"{_resolve(variant, path)}:{mode}" for variant, mode in pairs]

    return check_against(path, {_resolve(v, path): resolved(b) for v, b in table.items()}, cells)


def _configs(path: str, text: str, table) -> dict:
    """{name: validated config} from an experiment's [configs] table; {"base": {}} without one."""
    from compilekit.compile.knobs import validate

    if not table:
        return {"base": {}}
    out = {}
    for name, config in table.items():
        where = f"{path}, {_where(text, key=name)}"
        if not isinstance(config, dict):
            raise UserError(
                f"{where}: config {name!r} must be a table of Inductor options, e.g. "
                f"{name} = {{ coordinate_descent_tuning = true }}"
            )
        if not good_name(name):
            raise UserError(
                f"{where}: config name {name!r} must be letters, digits, _ . , + = @ - "
                "(not starting with '.')"
            )
        out[name] = validate(config, where)
    return out


def good_name(name: str) -> bool:
    """A name the experiment gives a folder or a label (its own, a config's): short, and
    unchanged by the one sanitizer (spec.path_safe)."""
    return 0 < len(name) <= 100 and path_safe(name) == name


# What each list holds, and the checks on scalars, beyond EXPERIMENT_KEYS' container types.
LIST_ITEMS = {k: str for k in ("variants", "modes", "shapes", "passes", "grads", "allocs")}


def _check_type(path: str, text: str, key: str, value) -> None:
    """One line naming the key, its line and the expected type, for any value TOML allows but
    an experiment does not."""
    expected = {**EXPERIMENT_KEYS, "note": str}[key]
    where = f"{path}, {_where(text, key=key)}"
    # bool is an int in Python; `seed = true` is not a seed
    if not isinstance(value, expected) or isinstance(value, bool):
        names = " or ".join(
            t.__name__ for t in (expected if isinstance(expected, tuple) else (expected,))
        )
        raise UserError(
            f"{where}: {key!r} must be {names}, not {type(value).__name__} ({value!r})"
        )
    if key in LIST_ITEMS and not all(isinstance(item, LIST_ITEMS[key]) for item in value):
        raise UserError(
            f"{where}: {key!r} must be a list of strings, e.g. {key} = [{_EXAMPLES[key]}]"
        )
    if key == "timeout_s" and not value > 0:
        raise UserError(f"{where}: timeout_s must be a positive number of seconds, not {value}")
    if key == "seed":
        check_seed(value, f"{where}: seed")
    if key == "per_gpu" and value < 1:
        raise UserError(f"{where}: per_gpu must be at least 1 cell, not {value}")


_EXAMPLES = {
    "variants": '"naive", "sdpa"',
    "modes": '"eager", "default"',
    "shapes": '"8x16x1024x64"',
    "passes": '"naive-to-sdpa"',
}


def _resolve(variant: str, experiment_path: str) -> str:
    """A user variant's path, or a checkpoint's folder, relative to the experiment file (not
    the working directory)."""
    from compilekit.usercell import absolute_checkpoint

    variant = absolute_checkpoint(variant, os.path.dirname(os.path.abspath(experiment_path)))
    if ":" in variant and variant.split(":", 1)[0].endswith(".py"):
        file, fn = variant.rsplit(":", 1)
        if not os.path.isabs(file):
            file = os.path.join(os.path.dirname(os.path.abspath(experiment_path)), file)
        return f"{os.path.normpath(file)}:{fn}"
    return variant


def check_against(path: str, against: dict, cells: list) -> dict[str, list[tuple[str, str]]]:
    """The [against] table (a table: spec's key types say so), every name checked against the
    experiment's own cells (a baseline the experiment never measures would only print '-')."""
    pairs = {(c.variant, c.mode) for c in cells}
    variants = sorted({c.variant for c in cells})
    checked = {}
    for variant, baselines in against.items():
        if variant not in variants:
            raise UserError(
                f"{path}: [against] compares {variant!r}, which no cell of the experiment runs: "
                f"choose one of {', '.join(variants)}"
            )
        if not isinstance(baselines, list) or not all(isinstance(b, str) for b in baselines):
            raise UserError(
                f'{path}: [against] "{variant}" must list baselines as "variant:mode" strings'
            )
        parsed = [parse_baseline(b) for b in baselines]
        modes = {c.mode for c in cells if c.variant == variant}
        for text, (baseline, mode) in zip(baselines, parsed):
            wanted = modes if mode == SAME_MODE else {mode}
            if not any((baseline, m) in pairs for m in wanted):
                raise UserError(
                    f"{path}: [against] baseline {text!r} for {variant!r} is not a cell of the "
                    'experiment: write "variant:mode" for a variant and mode it runs ("variant:'
                    f"{SAME_MODE}\" for the compared cell's own mode)"
                )
        checked[variant] = parsed
    return checked
