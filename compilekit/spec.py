"""Cells: what one measurement is (variant x mode x shape x dtype x device), parsed and validated.

Everything a user can type lands here first, so bad input fails with one line that names the fix
before any subprocess starts.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import os
import re

from compilekit.errors import UserError
from compilekit.knobs import INDUCTOR_MODES

DTYPES = {
    "float32": "float32",
    "fp32": "float32",
    "float16": "float16",
    "fp16": "float16",
    "half": "float16",
    "bfloat16": "bfloat16",
    "bf16": "bfloat16",
    "float64": "float64",
}
DEVICES = ("auto", "cpu", "cuda")
SHAPE_RE = re.compile(r"^(\d+)x(\d+)x(\d+)x(\d+)$")


# Past these a cell cannot allocate its inputs (or its float64 reference) on any machine here.
MAX_DIM = 1 << 20
MAX_ELEMENTS = 1 << 34


@dataclasses.dataclass(frozen=True)
class Shape:
    """Attention problem size in the [B, H, S, D] layout."""

    batch: int
    heads: int
    seq: int
    head_dim: int

    def __str__(self) -> str:
        return f"{self.batch}x{self.heads}x{self.seq}x{self.head_dim}"

    def causal_flop(self) -> float:
        """FLOPs of causal attention: two matmuls of 2*B*H*S*S*D each, halved by the mask."""
        return 4.0 * self.batch * self.heads * self.seq * self.seq * self.head_dim / 2


def parse_shape(text: str) -> Shape:
    """Parse `BxHxSxD` (e.g. 8x16x1024x64) into a Shape."""
    match = SHAPE_RE.match(text.strip().lower())
    if not match or 0 in (dims := tuple(int(g) for g in match.groups())):
        raise UserError(
            f"malformed shape {text!r}: write BxHxSxD with positive integers, e.g. 8x16x1024x64"
        )
    if max(dims) > MAX_DIM or dims[0] * dims[1] * dims[2] * dims[3] > MAX_ELEMENTS:
        raise UserError(
            f"shape {text!r} is too large (each of q, k, v would hold "
            f"{dims[0] * dims[1] * dims[2] * dims[3]:,} elements; at most {MAX_ELEMENTS:,}, "
            f"and each dimension at most {MAX_DIM:,}): pick a smaller shape"
        )
    return Shape(*dims)


# torch seeds its generators with a 64-bit signed integer
MAX_SEED = 2**63 - 1


def check_seed(seed: int, what: str = "--seed") -> None:
    """A seed torch can take: 0 to MAX_SEED; one line naming the range otherwise."""
    if not 0 <= seed <= MAX_SEED:
        raise UserError(f"{what} must be an integer from 0 to 2**63-1, not {seed}")


def check_timeout(timeout_s: float) -> None:
    """A cell's timeout: a positive number of seconds."""
    if not timeout_s > 0:
        raise UserError(f"timeout must be a positive number of seconds, not {timeout_s:g}")


def parse_dtype(text: str) -> str:
    """Canonical dtype name (a torch attribute name) for a user spelling."""
    try:
        return DTYPES[text.strip().lower()]
    except KeyError:
        raise UserError(
            f"unknown dtype {text!r}: choose one of {', '.join(sorted(set(DTYPES.values())))}"
        ) from None


def parse_device(text: str) -> str:
    """Validate a device name; `auto` is resolved later, where torch is imported."""
    name = text.strip().lower()
    if name not in DEVICES:
        raise UserError(f"unknown device {text!r}: choose one of {', '.join(DEVICES)}")
    return name


# The most cells one experiment may hold.
MAX_CELLS = 10_000
# The longest run directory name: its cache folder adds 13 characters, its lock 5 more, and
# a staging directory ".tmp-<pid>"; every one must stay under a file name's 255 bytes.
MAX_LABEL = 200


@dataclasses.dataclass(frozen=True)
class Cell:
    """One measurement. `variant` is a registry name or `path/to/file.py:callable`."""

    variant: str
    mode: str
    shape: Shape
    dtype: str
    device: str
    seed: int = 0
    config: tuple = ()  # Inductor options, as sorted (key, value) pairs (compilekit/knobs.py)
    config_name: str = ""  # its name in the experiment's [configs], or made from --set
    passes: tuple = ()  # custom graph passes, `path.py:factory` each (compilekit/passes.py)

    def label(self) -> str:
        """A file-system-safe name for this cell's run directory, unique per cell: a user
        variant carries a hash of its file's absolute path, a non-default seed its value."""
        variant = self.variant
        if ":" in variant and variant.split(":", 1)[0].endswith(".py"):
            path, fn = variant.rsplit(":", 1)
            digest = hashlib.sha1(os.path.abspath(path).encode()).hexdigest()[:8]
            stem = os.path.splitext(os.path.basename(path))[0]
            variant = re.sub(r"[^A-Za-z0-9_.-]+", "_", f"{stem}.{fn}") + f"-{digest}"
        seed = f"__seed{self.seed}" if self.seed else ""
        config = f"__cfg-{self.config_name}" if self.config else ""
        if self.passes:
            from compilekit.passes import label_of

            config += "__pass-" + "+".join(label_of(spec) for spec in self.passes)
        label = f"{variant}__{self.mode}__{self.shape}__{self.dtype}__{self.device}{seed}{config}"
        if len(label) <= MAX_LABEL:
            return label
        # a file name holds 255 bytes, and the cache folder and lock add a hash and a suffix
        digest = hashlib.sha1(label.encode()).hexdigest()[:10]
        return f"{label[: MAX_LABEL - 12]}--{digest}"

    def to_dict(self) -> dict:
        return {
            "variant": self.variant,
            "mode": self.mode,
            "shape": str(self.shape),
            "dtype": self.dtype,
            "device": self.device,
            "seed": self.seed,
            "config": dict(self.config),
            "config_name": self.config_name,
            "passes": list(self.passes),
        }

    @classmethod
    def from_dict(cls, data: dict) -> Cell:
        return cls(
            data["variant"],
            data["mode"],
            parse_shape(data["shape"]),
            data["dtype"],
            data["device"],
            int(data.get("seed", 0)),
            tuple(sorted((data.get("config") or {}).items())),
            data.get("config_name") or "",
            tuple(data.get("passes") or ()),
        )


# ---- experiments: a TOML file that expands to cells -------------------------------------------

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
}
MATRIX_KEYS = {
    "variants", "modes", "shapes", "dtype", "device", "seed", "timeout_s", "note", "passes",
}  # fmt: skip
# in a [[matrix]] table, `configs` names which of the top-level [configs] it sweeps


@dataclasses.dataclass
class Experiment:
    name: str
    description: str
    cells: list  # list[Cell], in file order, duplicates removed
    timeout_s: dict  # cell label -> seconds
    path: str
    # variant -> [(baseline variant, mode)]: the report's per-shape comparison (baselines.py)
    against: dict = dataclasses.field(default_factory=dict)


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


def load_experiment(path: str, device_resolver=None) -> Experiment:
    """Parse and validate an experiment file; every problem is a UserError naming its place."""
    import tomllib

    from compilekit.modes import check_mode
    from compilekit.passes import load_pass
    from compilekit.variant import check_variant

    if not os.path.isfile(path):
        raise UserError(
            f"experiment file {path!r} not found: give a TOML file such as "
            "experiments/blog_part3.toml"
        )
    with open(path, "rb") as f:
        raw = f.read()
    text = raw.decode("utf-8", errors="replace")
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
    configs = _configs(path, text, data.get("configs"))
    groups = data.get("matrix") or [{}]
    base = {k: v for k, v in data.items() if k in MATRIX_KEYS}
    cells, timeouts, seen = [], {}, set()
    for number, group in enumerate(groups, 1):
        place = f"[[matrix]] #{number}" if "matrix" in data else "top level"
        if not isinstance(group, dict):
            raise UserError(f"{path}: {place} must be a table")
        chosen = configs
        if "matrix" in data and "configs" in group:
            names = group["configs"]
            if not isinstance(names, list) or not all(n in configs for n in names) or not names:
                raise UserError(
                    f"{path}, {_where(text, key='configs')}: configs in {place} must list names "
                    f"from the [configs] table: {', '.join(configs)}"
                )
            chosen = {n: configs[n] for n in names}
        for key, value in group.items():
            if key == "configs" and "matrix" in data:
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
        for variant in merged["variants"]:
            try:
                check_variant(variant, float(merged.get("timeout_s", 900)))
            except UserError as exc:
                raise UserError(f"{path}, {_where(text, value=variant)}: {exc}") from None
        for mode in merged["modes"]:
            try:
                check_mode(mode)
            except UserError as exc:
                raise UserError(f"{path}, {_where(text, value=mode)}: {exc}") from None
        passes = tuple(_resolve(spec, path) for spec in merged.get("passes", []))
        for spec, written in zip(passes, merged.get("passes", [])):
            try:
                load_pass(spec)  # the file, the factory and its interface, before any cell
            except UserError as exc:
                raise UserError(f"{path}, {_where(text, value=written)}: {exc}") from None
        try:
            shapes = [parse_shape(s) for s in merged["shapes"]]
            dtype = parse_dtype(merged.get("dtype", "float32"))
            device = parse_device(merged.get("device", "auto"))
        except UserError as exc:
            raise UserError(f"{path}, {place}: {exc}") from None
        device = device_resolver(device) if device_resolver else device
        for (config_name, config), variant, mode, shape in itertools.product(
            chosen.items(), merged["variants"], merged["modes"], shapes
        ):
            inductor = mode in INDUCTOR_MODES  # eager and the cudagraphs backend: no Inductor
            if not inductor:
                config_name, config = "", {}
            cell = Cell(
                variant,
                mode,
                shape,
                dtype,
                device,
                int(merged.get("seed", 0)),
                tuple(sorted(config.items())),
                config_name if config else "",
                passes if inductor else (),
            )
            if cell in seen:
                continue
            seen.add(cell)
            if cell.label() in timeouts:
                raise UserError(
                    f"{path}: two cells share the run directory {cell.label()!r}: "
                    "rename one of the variants"
                )
            cells.append(cell)
            timeouts[cell.label()] = float(merged.get("timeout_s", 900))
            if len(cells) > MAX_CELLS:
                raise UserError(
                    f"{path}: over {MAX_CELLS:,} cells (at 2-60 s a cell, days of machine "
                    "time): split it into smaller experiments"
                )
    name = data.get("name") or os.path.splitext(os.path.basename(path))[0]
    if not NAME_RE.match(name):
        raise UserError(
            f"{path}, {_where(text, key='name')}: name {name!r} must be letters, digits, "
            "'_', '.' or '-' (it names the output directory)"
        )
    against = _against(path, data.get("against") or {}, cells)
    return Experiment(name, data.get("description", ""), cells, timeouts, path, against)


def _against(path: str, table: dict, cells: list) -> dict:
    """The [against] table, its user variants resolved as the matrix's are, then checked
    against the cells (the report's side: compilekit/baselines.py)."""

    def resolved(baselines):
        if not isinstance(baselines, list) or not all(isinstance(b, str) for b in baselines):
            return baselines  # check() names the problem
        pairs = map(parse_baseline, baselines)
        return [f"{_resolve(variant, path)}:{mode}" for variant, mode in pairs]

    return check_against(path, {_resolve(v, path): resolved(b) for v, b in table.items()}, cells)


def _configs(path: str, text: str, table) -> dict:
    """{name: validated config} from an experiment's [configs] table; {"base": {}} without one."""
    from compilekit.knobs import validate

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
        if not NAME_RE.match(name):
            raise UserError(f"{where}: config name {name!r} must be letters, digits, _ . -")
        out[name] = validate(config, where)
    return out


NAME_RE = re.compile(r"^[A-Za-z0-9_-][A-Za-z0-9_.-]{0,99}$")
# What each list holds, and the checks on scalars, beyond EXPERIMENT_KEYS' container types.
LIST_ITEMS = {"variants": str, "modes": str, "shapes": str, "passes": str}


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


_EXAMPLES = {
    "variants": '"naive", "sdpa"',
    "modes": '"eager", "default"',
    "shapes": '"8x16x1024x64"',
    "passes": '"naive-to-sdpa"',
}


def _resolve(variant: str, experiment_path: str) -> str:
    """A user variant's path, relative to the experiment file (not the working directory)."""
    if ":" in variant and variant.split(":", 1)[0].endswith(".py"):
        file, fn = variant.rsplit(":", 1)
        if not os.path.isabs(file):
            file = os.path.join(os.path.dirname(os.path.abspath(experiment_path)), file)
        return f"{os.path.normpath(file)}:{fn}"
    return variant


def parse_baseline(text: str) -> tuple[str, str]:
    """'variant:mode' -> (variant, mode); a user variant's own colon (file.py:fn) stays."""
    variant, _, mode = text.rpartition(":")
    return variant, mode


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
        for text, pair in zip(baselines, parsed):
            if pair not in pairs:
                raise UserError(
                    f"{path}: [against] baseline {text!r} for {variant!r} is not a cell of the "
                    'experiment: write "variant:mode" for a variant and mode it runs'
                )
        checked[variant] = parsed
    return checked
