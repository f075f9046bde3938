"""Seeded inputs, the float64 reference, and the correctness check."""

from __future__ import annotations

import dataclasses
import math

import torch

# max|out - ref| / max|ref| allowed per dtype: a few ulps of the output scale after two matmuls
# and a softmax. fp32 leaves room for TF32 matmuls when a user enables them.
ERROR_BOUNDS = {"float64": 1e-9, "float32": 1e-3, "float16": 5e-3, "bfloat16": 3e-2}


def make_inputs(shape, dtype: str, device: str, seed: int) -> tuple[torch.Tensor, ...]:
    """Seeded q, k, v of `shape` ([B, H, S, D]; k and v [B, G, K, D] at BxHgGxQxKxD), drawn in
    float32 so that every dtype sees the same values."""
    gen = torch.Generator(device="cpu").manual_seed(seed)
    queries = (shape.batch, shape.heads, shape.seq, shape.head_dim)
    kv_heads = getattr(shape, "kv_heads", shape.heads)
    keys = (shape.batch, kv_heads, getattr(shape, "keys", shape.seq), shape.head_dim)
    return tuple(
        torch.randn(dims, generator=gen).to(device=device, dtype=getattr(torch, dtype))
        for dims in (queries, keys, keys)
    )


def cell_inputs(variant, cell) -> tuple:
    """The positional inputs of a cell: q, k, v for an attention variant; for a model workload,
    what its factory built (the model becomes variant.attention, the callable every process
    compiles and times, and variant.workload keeps the rest). Under the static_inputs option
    (compile/knobs.py) the tensors among them are marked static, before anything compiles."""
    args = _built_inputs(variant, cell)
    if dict(cell.config).get("static_inputs"):
        mark_static(args)
    return args


def mark_static(args) -> None:
    """Mark the tensors among `args` static for torch.compile (mark_static_address): a CUDA
    graph then reads them in place rather than copying them in before each replay. Unguarded:
    the caller passes these very tensors on every call, so there is no address to check."""
    for arg in args:
        if isinstance(arg, torch.Tensor):
            torch._dynamo.mark_static_address(arg, guard=False)


def _built_inputs(variant, cell) -> tuple:
    if variant.factory is None:
        return make_inputs(cell.shape, cell.dtype, cell.device, cell.seed)
    from compilekit.compile.variant import model_name
    from compilekit.measure import fits, workload
    from compilekit.model.spec import HF, Decode
    from compilekit.model.varlen import Varlen

    shape = cell.shape
    if isinstance(shape, Varlen):  # the factory sees the lengths the cell's seed drew
        shape = dataclasses.replace(shape, lengths=tuple(shape.draw(cell.seed)))
    if model_name(variant.name) or variant.name.startswith(HF):  # tens of GB: do they fit?
        fits.check(variant.factory, variant.name, shape, cell.dtype, cell.device)
    made = workload.build(variant.factory, variant.name, shape, cell.dtype, cell.device, cell.seed)
    variant.attention, variant.workload = made.fn, made
    if made.flops is not None:
        variant.flops = lambda shape: made.flops
    if isinstance(shape, Decode):  # the callable is one decode step (measure/decode)
        from compilekit.measure.decode.session import Session

        session = Session(made, shape, variant.name)
        variant.attention, variant.session = session.step, session
        return session.step_args
    return made.inputs


def error_bound(variant, dtype: str) -> float:
    """The max relative error a cell may show: a workload's own tolerance, else the dtype's."""
    made = variant.workload
    if made is not None and made.tolerance is not None:
        return float(made.tolerance)
    return ERROR_BOUNDS[dtype]


def expected_output(variant, args, dtype: str) -> tuple[tuple | None, torch.dtype]:
    """(shape, dtype) an output must have: q's for attention; for a workload any shape (the
    reference check compares it), in the cell's dtype."""
    if variant.factory is None:
        return tuple(args[0].shape), args[0].dtype
    return None, getattr(torch, dtype)


def causal_reference(q, k, v) -> torch.Tensor:
    """Causal softmax(q kT / sqrt(D)) v in float64, a few heads at a time (variants.masks)."""
    from compilekit.variants.masks import reference

    return reference(q, k, v, causal=True)


def reference_output(variant, *args) -> tuple[torch.Tensor, str]:
    """The float64 truth for a variant and what it is: its own `reference`, causal attention
    for a built-in without one, or (a user variant without one) itself on float64 inputs; a
    workload's own reference, or its model in float64 (measure/workload.py)."""
    if variant.factory is not None:
        from compilekit.measure import workload

        return workload.reference_output(variant.workload, args)
    q, k, v = args
    q64, k64, v64 = (t.to(torch.float64) for t in (q, k, v))
    if variant.reference is not None:
        return variant.reference(q64, k64, v64), "the variant's float64 reference"
    if variant.builtin:
        return causal_reference(q, k, v), "float64 causal attention"
    return variant.attention(q64, k64, v64), "the same function on float64 inputs (no reference)"


def output_problem(out, shape: tuple | None, dtype) -> str | None:
    """Why `out` cannot be the cell's output (expected_output: its shape, None for any, and
    dtype), in the user's terms."""
    if not isinstance(out, torch.Tensor):
        return f"returned {type(out).__name__}, expected a Tensor"
    if shape is not None and tuple(out.shape) != shape:
        return f"output shape {tuple(out.shape)} != expected {shape}"
    if out.dtype != dtype:  # a float16 output of a float32 cell is not that cell's answer
        return f"output dtype {_name(out.dtype)} != the cell's {_name(dtype)}"
    return None


def _name(dtype) -> str:
    return str(dtype).removeprefix("torch.")


def checkable(variant, out):
    """The output in the layout its reference gives (a varlen variant's: packed [T, H, D])."""
    unpack = getattr(variant.workload, "unpack", None)
    return unpack(out) if unpack is not None else out


def max_rel_err(out: torch.Tensor, ref: torch.Tensor) -> float:
    """max|out - ref| / max|ref|; NaN or inf anywhere in `out` gives inf, so it never passes."""
    if out.shape != ref.shape:
        return math.inf
    out = out.to(torch.float64)
    if not torch.isfinite(out).all():
        return math.inf
    return float((out - ref).abs().max() / ref.abs().max().clamp_min(1e-30))


def dtype_probe(dtype: str, device: str) -> str | None:
    """Ask torch whether this device runs matmul and softmax in this dtype; the reason if not."""
    try:
        x = torch.ones(16, 16, dtype=getattr(torch, dtype), device=device)
        torch.softmax(x @ x, dim=-1).sum().item()
    except (RuntimeError, TypeError) as exc:
        return f"{dtype} is not supported on {device}: {str(exc).splitlines()[0]}"
    return None
