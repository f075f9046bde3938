"""The size of what an op returns in Inductor's output code, where the code writes none.

An op Inductor falls back to (SDPA, a custom op, `cumsum`) allocates its own output:
`buf17 = torch.ops.aten._scaled_dot_product_flash_attention.default(...)`, then
`buf18 = buf17[0]`. The code gives no dtype for it, and every buffer that later reuses its
memory (`buf22 = reinterpret_tensor(buf18, ...)`) inherits the gap, so the kernels after a
decode step's attention, its matmuls among them, would have no bytes. The op's own meta function,
run on meta tensors of its arguments' sizes, says what it returns (codecost._tensor_sizes).
"""

from __future__ import annotations

import ast

import torch


def size(value, sized, results: dict, name: str) -> tuple[tuple | None, str]:
    """((shape, dtype) or None, why not) of what an assignment's value returns: an op called
    for its result, or one item of an earlier one's (`buf4 = buf3[0]`). sized(node): the
    (shape, dtype) of a tensor expression of the code, or None; results: each op's result by
    the name it was assigned to (filled here, for the items read later)."""
    if isinstance(value, ast.Subscript) and isinstance(value.value, ast.Name):
        result = results.get(value.value.id)
        index = value.slice.value if isinstance(value.slice, ast.Constant) else None
        if isinstance(result, (tuple, list)) and isinstance(index, int) and index < len(result):
            return _meta_size(result[index]), "an item of an op's result that is no tensor"
        return None, f"an item of {value.value.id}, whose result is not known"
    op_name = ast.unparse(value.func) if isinstance(value, ast.Call) else ""
    if not op_name.startswith("torch.ops."):
        return None, "what the output code assigns it is no allocation, view or op"
    try:
        op = torch.ops
        for part in op_name.split(".")[2:]:
            op = getattr(op, part)
        args = [_meta_arg(a, sized) for a in value.args]
        kwargs = {kw.arg: _meta_arg(kw.value, sized) for kw in value.keywords if kw.arg}
        result = op(*args, **kwargs)
    except Exception as exc:  # an unknown argument, no meta function, no such op here
        failed = type(exc).__name__
        return None, f"returned by {op_name}, whose meta function gave no size ({failed})"
    results[name] = result
    return _meta_size(result), f"{op_name} returns no tensor"


def _meta_size(result) -> tuple[tuple, torch.dtype] | None:
    if isinstance(result, torch.Tensor):
        return tuple(result.shape), result.dtype
    return None


def _meta_arg(node, sized):
    """An op's argument as its meta function takes it: a tensor of known size as a meta tensor
    of that size, a literal as itself; ValueError for anything else."""
    found = sized(node)
    if found is not None:
        return torch.empty(found[0], dtype=found[1], device="meta")
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_meta_arg(item, sized) for item in node.elts]
    if isinstance(node, ast.Attribute) and ast.unparse(node).startswith("torch."):
        attr = getattr(torch, node.attr, None)  # torch.float32, torch.contiguous_format
        if attr is not None:
            return attr
    return ast.literal_eval(node)
