"""Cells: what one measurement is (variant x mode x shape x dtype x device), parsed and validated.

Everything a user can type lands here first, so bad input fails with one line that names the fix
before any subprocess starts.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re

from compilekit.model.errors import UserError

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
# How a model is called, as users call it: with nothing around it (the model frozen:
# requires_grad off), inside torch.no_grad(), or inside torch.inference_mode()
GRAD_MODES = ("off", "no-grad", "inference")
# An hf: checkpoint's weights: its own where it has them (else random), or random from its config
WEIGHTS = ("auto", "random")
# The CUDA caching allocator's settings a cell may set (PYTORCH_CUDA_ALLOC_CONF's keys), as
# `key:value[,key:value]`: expandable_segments:True compares the two allocators
ALLOC_KEYS = ("expandable_segments", "max_split_size_mb", "garbage_collection_threshold",
              "roundup_power2_divisions")  # fmt: skip
SHAPE_RE = re.compile(r"^(\d+)x(\d+)(?:g(\d+))?x(\d+)(?:x(\d+))?x(\d+)$")


# Past these a cell cannot allocate its inputs (or its float64 reference) on any machine here.
MAX_DIM = 1 << 20
MAX_ELEMENTS = 1 << 34


# `hf:<hub id or folder>[@attention]`: any transformers checkpoint (variants/hf.py)
HF = "hf:"


def hf_parts(spec: str) -> tuple[str, str]:
    """(the checkpoint: a hub id or a folder, the attention after its last '@' or '')."""
    body = spec[len(HF) :]
    where, _, attention = body.rpartition("@") if "@" in body else (body, "", "")
    return where, attention


# What a file name made of a user's words keeps; any other run of characters becomes one "_"
UNSAFE_RE = re.compile(r"[^A-Za-z0-9_.,+=@-]+")


def path_safe(text: str) -> str:
    """The one sanitizer of a user's words on their way into a file name (a run directory, its
    cache folder and lock, a sweep's folder, a config's and a pass's label): one name, never a
    path. Letters, digits and _ . , + = @ - stay; a separator or anything else becomes "_", and
    a leading dot too (no hidden name, no '..')."""
    safe = UNSAFE_RE.sub("_", text)
    return "_" + safe[1:] if safe.startswith(".") else safe


def file_label(spec: str, digits: int = 8) -> str:
    """`path/to/file.py:name` as a short name: the file's stem, the name and a hash of the
    file's absolute path (two files of one stem stay apart)."""
    path, name = spec.rsplit(":", 1)
    path = os.path.abspath(path)
    stem = os.path.splitext(os.path.basename(path))[0]
    return f"{stem}.{name}-{hashlib.sha1(path.encode()).hexdigest()[:digits]}"


def pass_label(spec: str) -> str:
    """A pass's short name: a shipped pass's own name, else file_label (compile/passes.py
    checks the spec; Cell.label makes it safe for a file name)."""
    return file_label(spec, 6) if ":" in spec else spec


@dataclasses.dataclass(frozen=True)
class Shape:
    """Attention problem size in the [B, H, S, D] layout. kv_seq: the keys' length where it is
    not the queries' (BxHxQxKxD, e.g. one query over a cache of 8192 keys at decode), else 0.
    Causal then means what it means at decode: the queries are the last Q positions of the
    sequence (bottom-right alignment), so a single query sees every key."""

    batch: int
    heads: int
    seq: int
    head_dim: int
    kv_seq: int = 0
    # K/V heads where fewer than the query heads (BxHgGx...: GQA, e.g. 1x32g8x1x8192x128),
    # else 0: k and v are then made with that many heads, as a GQA model holds its cache
    kv_groups: int = 0

    @property
    def keys(self) -> int:
        return self.kv_seq or self.seq

    @property
    def kv_heads(self) -> int:
        return self.kv_groups or self.heads

    def __str__(self) -> str:
        keys = f"x{self.kv_seq}" if self.kv_seq else ""
        heads = f"{self.heads}g{self.kv_groups}" if self.kv_groups else f"{self.heads}"
        return f"{self.batch}x{heads}x{self.seq}{keys}x{self.head_dim}"


@dataclasses.dataclass(frozen=True)
class Tokens:
    """A model workload's problem size: batch x sequence length (the model's config gives the
    rest). heads and head_dim are 0: a model has them inside, not in its shape."""

    batch: int
    seq: int
    heads = 0
    head_dim = 0

    def __str__(self) -> str:
        return f"{self.batch}x{self.seq}"


TOKENS_RE = re.compile(r"^(\d+)x(\d+)$")


@dataclasses.dataclass(frozen=True)
class Decode(Tokens):
    """A decode cell's size: batch x prompt tokens, then `new` tokens generated one at a time
    into a static KV cache of `capacity` positions (prompt + new unless given). A model
    workload's factory sees it as Tokens of the prompt (seq): it builds the model and the
    prompt, and compilekit/measure/decode runs the generation."""

    new: int = 1
    capacity: int = 0

    @property
    def prompt(self) -> int:
        return self.seq

    @property
    def cache_len(self) -> int:
        return self.capacity or self.seq + self.new

    def __str__(self) -> str:
        cap = f"@{self.capacity}" if self.capacity else ""
        return f"{self.batch}x{self.seq}+{self.new}{cap}"


DECODE_RE = re.compile(r"^(\d+)x(\d+)\+(\d+)(?:@(\d+))?$")
# any shape a model workload takes (result files are checked against it)
MODEL_SHAPE_RE = re.compile(f"{TOKENS_RE.pattern}|{DECODE_RE.pattern}")


def parse_decode(text: str) -> Decode:
    """`BxP+N` (batch x prompt tokens, N new tokens) or `BxP+N@C` (a KV cache of C positions)."""
    match = DECODE_RE.match(text.strip().lower())
    nums = [int(g) for g in match.groups() if g is not None] if match else []
    if not match or 0 in nums:
        raise UserError(
            f"malformed decode shape {text!r}: write BxP+N with positive integers (batch x "
            "prompt tokens + new tokens, e.g. 1x32+200), or BxP+N@C for a KV cache of C "
            "positions (e.g. 1x32+200@2048)"
        )
    if max(nums) > MAX_DIM:
        raise UserError(f"shape {text!r} is too large: each number at most {MAX_DIM:,}")
    shape = Decode(*nums[:3], capacity=nums[3] if len(nums) == 4 else 0)
    if shape.cache_len < shape.prompt + shape.new:
        raise UserError(
            f"decode shape {text!r}: a KV cache of {shape.cache_len} positions cannot hold "
            f"{shape.prompt} prompt + {shape.new} new tokens: give @{shape.prompt + shape.new} "
            "or more, or leave @C out"
        )
    return shape


def parse_shape(text: str) -> Shape | Tokens:
    """Parse `BxHxSxD` (e.g. 8x16x1024x64, an attention variant's q, k, v) into a Shape,
    `BxS` (e.g. 8x128, a model workload's batch and sequence length) into Tokens, or `BxP+N`
    (e.g. 1x32+200, a model's decode: prompt and new tokens) into Decode, or a ragged batch
    (e.g. lognormal512@16384x32g8x128: compilekit/model/varlen.py) into Varlen."""
    if "+" in text:
        return parse_decode(text)
    if "," in text or "@" in text:  # ragged documents: listed lengths, or a distribution
        from compilekit.model.varlen import parse_varlen

        return parse_varlen(text)
    tokens = TOKENS_RE.match(text.strip().lower())
    if tokens and 0 not in (pair := tuple(int(g) for g in tokens.groups())):
        if max(pair) > MAX_DIM:
            raise UserError(f"shape {text!r} is too large: each dimension at most {MAX_DIM:,}")
        return Tokens(*pair)
    match = SHAPE_RE.match(text.strip().lower())
    groups = match.groups() if match else ()
    dims = tuple(int(g) for i, g in enumerate(groups) if g is not None and i != 2)
    if not match or 0 in dims or groups[2] in ("0", "00"):
        raise UserError(
            f"malformed shape {text!r}: write BxHxSxD with positive integers for an attention "
            "variant (e.g. 8x16x1024x64), BxHxQxKxD for Q queries over K keys (e.g. "
            "16x32x1x8192x128) and H as HgG for G K/V heads (GQA, e.g. 1x32g8x1x8192x128), "
            "BxS for a model (e.g. 8x128), BxP+N for a model's decode (e.g. 1x32+200), "
            "LENGTHSxHxD for a ragged batch (e.g. lognormal512@16384x32g8x128, 100,37,512x32x128)"
        )
    batch, heads, seq, *keys, dim = dims
    kv = int(groups[2]) if groups[2] else heads
    if heads % kv:
        raise UserError(
            f"shape {text!r}: {kv} K/V heads must divide the {heads} query heads (GQA)"
        )
    kv_seq = keys[0] if keys and keys[0] != seq else 0
    shape = Shape(batch, heads, seq, dim, kv_seq, kv if kv != heads else 0)
    largest = batch * heads * max(seq, shape.keys) * dim
    if max(dims) > MAX_DIM or largest > MAX_ELEMENTS:
        raise UserError(
            f"shape {text!r} is too large (q, k or v would hold {largest:,} elements; at most "
            f"{MAX_ELEMENTS:,}, and each dimension at most {MAX_DIM:,}): pick a smaller shape"
        )
    if shape.keys < seq:
        raise UserError(
            f"shape {text!r}: {seq} queries over {shape.keys} keys; at decode the queries are "
            "the last positions of the keys, so Q must be at most K"
        )
    return shape


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


def parse_grad(text: str) -> str:
    """Validate a grad mode (GRAD_MODES)."""
    if text not in GRAD_MODES:
        raise UserError(f"grad mode {text!r}: choose one of {', '.join(GRAD_MODES)}")
    return text


def parse_alloc(text: str) -> str:
    """Validate a cell's allocator settings (ALLOC_KEYS), '' for the process's own."""
    text = (text or "").replace(" ", "")
    for part in filter(None, text.split(",")):
        key, colon, value = part.partition(":")
        if key not in ALLOC_KEYS or not colon or not value:
            raise UserError(
                f"allocator setting {text!r}: give key:value pairs of PYTORCH_CUDA_ALLOC_CONF, "
                f"e.g. expandable_segments:True (keys: {', '.join(ALLOC_KEYS)})"
            )
    return text


def parse_weights(text: str, variant: str) -> str:
    """Validate a cell's weights (WEIGHTS): another than "auto" goes with an hf: checkpoint."""
    if text not in WEIGHTS:
        raise UserError(f"weights {text!r}: choose one of {', '.join(WEIGHTS)}")
    if text != "auto" and not variant.startswith(HF):
        raise UserError(
            f"--weights {text} goes with a checkpoint (hf:<hub id or folder>), not {variant!r}: "
            "the built-in models and factories build random weights already"
        )
    return text


def parse_device(text: str) -> str:
    """Validate a device name; `auto` is resolved later, where torch is imported."""
    name = text.strip().lower()
    if name not in DEVICES:
        raise UserError(f"unknown device {text!r}: choose one of {', '.join(DEVICES)}")
    return name


# The longest run directory name: its cache folder adds 13 characters, its lock 5 more, and
# a staging directory ".tmp-<pid>"; every one must stay under a file name's 255 bytes.
MAX_LABEL = 200


@dataclasses.dataclass(frozen=True)
class Cell:
    """One measurement. `variant` is a registry name or `path/to/file.py:callable`."""

    variant: str
    mode: str
    shape: Shape | Tokens
    dtype: str
    device: str
    seed: int = 0
    config: tuple = ()  # Inductor options, as sorted (key, value) pairs (compile/knobs.py)
    config_name: str = ""  # its name in the experiment's [configs], or made from --set
    passes: tuple = ()  # custom graph passes, `path.py:factory` each (compile/passes.py)
    grad: str = "off"  # GRAD_MODES: what the calls run inside (compile/modes.grad_context)
    weights: str = "auto"  # WEIGHTS: an hf: checkpoint's own, or random from its config
    alloc: str = ""  # PYTORCH_CUDA_ALLOC_CONF of the cell's processes (ALLOC_KEYS); '' inherits

    def label(self) -> str:
        """A file-system-safe name for this cell's run directory, unique per cell: a user
        variant carries a hash of its file's absolute path, a non-default seed its value."""
        # a user's file, alone or plugged into a model (`model@file.py:fn`), by file_label
        model, at, variant = self.variant.rpartition("@")
        if ":" in variant and variant.split(":", 1)[0].endswith(".py"):
            variant = file_label(variant)
        variant = model + at + variant
        if variant.startswith(HF):  # a checkpoint: its folder's or id's last part, hashed
            where, attention = hf_parts(variant)
            digest = hashlib.sha1(where.encode()).hexdigest()[:8]
            variant = f"hf-{os.path.basename(where.rstrip('/'))}-{digest}"
            variant += f"@{attention}" if attention else ""
        seed = f"__seed{self.seed}" if self.seed else ""
        seed += f"__grad-{self.grad}" if self.grad != "off" else ""
        seed += f"__{self.weights}-weights" if self.weights != "auto" else ""
        seed += f"__alloc-{self.alloc}" if self.alloc else ""
        config = f"__cfg-{self.config_name}" if self.config else ""
        if self.passes:
            config += "__pass-" + "+".join(pass_label(spec) for spec in self.passes)
        label = f"{variant}__{self.mode}__{self.shape}__{self.dtype}__{self.device}{seed}{config}"
        label = path_safe(label)
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
            "grad": self.grad,
            "weights": self.weights,
            # only when set: the cache keys of cells without it stay those they had
            **({"alloc": self.alloc} if self.alloc else {}),
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
            data.get("grad") or "off",
            data.get("weights") or "auto",
            data.get("alloc") or "",
        )


# ---- experiments: a TOML file that expands to cells -------------------------------------------
