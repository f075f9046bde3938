"""Which frames of a stack are the user's, and which line an op is charged to: the innermost
line of a model's own code where the op came through one, else the innermost user line."""

from __future__ import annotations

import os
import re

import torch

from compilekit.compile.variant import VARIANTS_DIR

TORCH_DIR = os.path.dirname(torch.__file__)
COMPILEKIT_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STDLIB_DIR = os.path.dirname(os.__file__)
FRAME_RE = re.compile(
    r'File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<func>\S+)\n(?P<code>[^\n]*)'
)
# transformers' modules of that name shared by every model (4.x builds its masks in
# modeling_attn_mask_utils.py): helpers, not a model's code
SHARED_MODELING = ("modeling_layers.py", "modeling_outputs.py")


def is_user_file(path: str) -> bool:
    """A frame worth showing: not torch, not compilekit, not Python's own library; but
    compilekit's own variants (installed inside compilekit), and packages installed inside
    Python's library folder (site-packages of a Python without a virtual environment:
    transformers' modeling files there)."""
    if path.startswith("<"):  # <frozen runpy>, <stdin>, <string>: no file to show
        return False
    path = os.path.abspath(path)
    if path.startswith(VARIANTS_DIR + os.sep):
        return True
    if path.startswith((TORCH_DIR + os.sep, COMPILEKIT_DIR + os.sep)):
        return False
    if path.startswith(STDLIB_DIR + os.sep):
        return os.path.relpath(path, STDLIB_DIR).startswith(("site-packages", "dist-packages"))
    return True


def user_frames(stack_text: str) -> list[dict]:
    """Frames of a formatted stack outside torch and compilekit, innermost first."""
    frames = []
    for m in FRAME_RE.finditer(stack_text):
        if not is_user_file(m["file"]):
            continue
        frames.append({"file": m["file"], "line": int(m["line"]), "code": m["code"].strip()})
    return frames[::-1]


def is_model_file(path: str) -> bool:
    """A model's own code: transformers' `modeling_<model>.py`, not a `modeling_*_utils.py`
    every model shares."""
    name = os.path.basename(path)
    shared = name.endswith("_utils.py") or name in SHARED_MODELING
    return name.startswith("modeling_") and not shared


def origin(frames: list[dict]) -> list[dict]:
    """The line an op is charged to, from its user frames (innermost first): the innermost
    line in a model's own code (transformers' `modeling_*.py`), where the op came through one,
    so a model's helpers (its activation, attention and mask functions) charge the model's line
    that called them; otherwise the innermost line."""
    for frame in frames:
        if is_model_file(frame["file"]):
            return [frame]
    return frames[:1]
