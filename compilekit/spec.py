"""Cells: what one measurement is (variant x mode x shape x dtype x device), parsed and validated.

Everything a user can type lands here first, so bad input fails with one line that names the fix
before any subprocess starts.
"""

from __future__ import annotations

import dataclasses
import json
import re

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


class UserError(Exception):
    """Bad input: the CLI prints the message as one line and exits 2."""


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
    return Shape(*dims)


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


@dataclasses.dataclass(frozen=True)
class Cell:
    """One measurement. `variant` is a registry name or `path/to/file.py:callable`."""

    variant: str
    mode: str
    shape: Shape
    dtype: str
    device: str
    seed: int = 0

    def label(self) -> str:
        """A file-system-safe name for this cell's run directory."""
        variant = re.sub(r"[^A-Za-z0-9_.-]+", "_", self.variant.rsplit("/", 1)[-1])
        return f"{variant}__{self.mode}__{self.shape}__{self.dtype}__{self.device}"

    def to_dict(self) -> dict:
        return {
            "variant": self.variant,
            "mode": self.mode,
            "shape": str(self.shape),
            "dtype": self.dtype,
            "device": self.device,
            "seed": self.seed,
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
}
MATRIX_KEYS = {"variants", "modes", "shapes", "dtype", "device", "seed", "timeout_s", "note"}


@dataclasses.dataclass
class Experiment:
    name: str
    description: str
    cells: list  # list[Cell], in file order, duplicates removed
    timeout_s: dict  # cell label -> seconds
    path: str


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
    import os
    import tomllib

    from compilekit.modes import check_mode
    from compilekit.variant import load_variant

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
        if not isinstance(value, EXPERIMENT_KEYS[key]):
            raise UserError(
                f"{path}, {_where(text, key=key)}: {key!r} has the wrong type "
                f"({type(value).__name__})"
            )
    groups = data.get("matrix") or [{}]
    base = {k: v for k, v in data.items() if k in MATRIX_KEYS}
    cells, timeouts = [], {}
    for number, group in enumerate(groups, 1):
        place = f"[[matrix]] #{number}" if "matrix" in data else "top level"
        if not isinstance(group, dict):
            raise UserError(f"{path}: {place} must be a table")
        for key in group:
            if key not in MATRIX_KEYS:
                raise UserError(
                    f"{path}, {_where(text, key=key)}: unknown key {key!r} in {place}: "
                    f"allowed are {', '.join(sorted(MATRIX_KEYS))}"
                )
        merged = {**base, **group}
        for key in ("variants", "modes", "shapes"):
            if not merged.get(key):
                raise UserError(
                    f"{path}, {place} has no {key}: the matrix is empty; list at "
                    f"least one in {key} = [...]"
                )
        for variant in merged["variants"]:
            try:
                load_variant(variant)
            except UserError as exc:
                raise UserError(f"{path}, {_where(text, value=variant)}: {exc}") from None
        for mode in merged["modes"]:
            try:
                check_mode(mode)
            except UserError as exc:
                raise UserError(f"{path}, {_where(text, value=mode)}: {exc}") from None
        try:
            shapes = [parse_shape(s) for s in merged["shapes"]]
            dtype = parse_dtype(merged.get("dtype", "float32"))
            device = parse_device(merged.get("device", "auto"))
        except UserError as exc:
            raise UserError(f"{path}, {place}: {exc}") from None
        device = device_resolver(device) if device_resolver else device
        for variant in merged["variants"]:
            for mode in merged["modes"]:
                for shape in shapes:
                    cell = Cell(variant, mode, shape, dtype, device, int(merged.get("seed", 0)))
                    if cell not in cells:
                        cells.append(cell)
                        timeouts[cell.label()] = float(merged.get("timeout_s", 900))
    name = data.get("name") or os.path.splitext(os.path.basename(path))[0]
    return Experiment(name, data.get("description", ""), cells, timeouts, path)
