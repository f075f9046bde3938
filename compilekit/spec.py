"""Cells: what one measurement is (variant x mode x shape x dtype x device), parsed and validated.

Everything a user can type lands here first, so bad input fails with one line that names the fix
before any subprocess starts.
"""

from __future__ import annotations

import dataclasses
import re

DTYPES = {"float32": "float32", "fp32": "float32", "float16": "float16", "fp16": "float16",
          "half": "float16", "bfloat16": "bfloat16", "bf16": "bfloat16", "float64": "float64"}
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
        raise UserError(f"malformed shape {text!r}: write BxHxSxD with positive integers, "
                        "e.g. 8x16x1024x64")
    return Shape(*dims)


def parse_dtype(text: str) -> str:
    """Canonical dtype name (a torch attribute name) for a user spelling."""
    try:
        return DTYPES[text.strip().lower()]
    except KeyError:
        raise UserError(f"unknown dtype {text!r}: choose one of "
                        f"{', '.join(sorted(set(DTYPES.values())))}") from None


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
        return {"variant": self.variant, "mode": self.mode, "shape": str(self.shape),
                "dtype": self.dtype, "device": self.device, "seed": self.seed}

    @classmethod
    def from_dict(cls, data: dict) -> Cell:
        return cls(data["variant"], data["mode"], parse_shape(data["shape"]), data["dtype"],
                   data["device"], int(data.get("seed", 0)))
