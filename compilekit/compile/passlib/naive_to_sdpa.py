"""`--pass naive-to-sdpa`: attention written out op by op becomes one scaled_dot_product_attention.

It reads the ATen graph Inductor hands to `joint_custom_pre_pass`, where the blog's
`softmax(masked_fill(q @ k^T * scale, mask, -inf)) @ v` arrives decomposed:

    out = view(bmm(view(expand(P)), view(expand(v))))
    P   = div(exp(sub(X, amax(X, -1))), sum(exp(...), -1))     softmax over the last dim
    X   = where(mask, fill, S) or where(keep, S, fill)          masked_fill, torch.where
    S   = view(bmm(q, k^T)) / c, * c, / sqrt(d), * (1 / sqrt(d)), or unscaled

The mask decides what SDPA is told:
- built in the graph from iota (`triu(ones, 1)`, `~tril(ones)`, or a `tril` keep-mask), where
  the masked positions are exactly those with column - row >= 1 on a square S x S: proved
  causal, so `is_causal=True` (the fused kernels skip the masked blocks);
- anything else (a mask passed in, like the blog's cached one): `attn_mask`, and only when the
  fill is -inf (with finfo.min a fully masked row would average instead of giving NaN).
A fill of -inf or finfo(dtype).min is accepted for a proved causal mask (no row is fully
masked there). Whatever does not fit (softmax over another dim, another mask, a non-constant
scale) stays as it is. `matches` counts the rewrites.
"""

from __future__ import annotations

import torch
from torch._inductor.custom_graph_pass import CustomGraphPass

aten, prims = torch.ops.aten, torch.ops.prims
CAST = prims.convert_element_type.default
VIEWS = {aten.view.default, aten.reshape.default, aten.clone.default, aten._unsafe_view.default,
         CAST}  # fmt: skip
RESHAPES = VIEWS | {aten.expand.default}  # around a bmm: matmul's own batching


def _is(node, *targets) -> bool:
    return (
        isinstance(node, torch.fx.Node) and node.op == "call_function" and node.target in targets
    )


def _through(node, ops=RESHAPES):
    while _is(node, *ops):
        node = node.args[0]
    return node


def _val(node):
    return node.meta.get("val") if isinstance(node, torch.fx.Node) else None


def _last_dim(dims, node) -> bool:
    val = _val(node)
    return val is not None and list(dims) in ([-1], [val.dim() - 1])


def softmax_input(p):
    """X when p is softmax(X, dim=-1) as Inductor's decomposition writes it, else None."""
    p = _through(p, {CAST})
    if not _is(p, aten.div.Tensor) or len(p.args) != 2:
        return None
    e, total = p.args
    if not (
        _is(total, aten.sum.dim_IntList) and total.args[0] is e and _last_dim(total.args[1], e)
    ):
        return None
    if not (_is(e, aten.exp.default) and _is(e.args[0], aten.sub.Tensor)):
        return None
    x, peak = e.args[0].args
    if not (_is(peak, aten.amax.default) and peak.args[0] is x and _last_dim(peak.args[1], x)):
        return None
    return _through(x, {CAST})


def _constant(node):
    """A scalar constant node's value (scalar_tensor, a one-element full), else None."""
    if isinstance(node, (int, float)):
        return float(node)
    if _is(node, aten.scalar_tensor.default):
        return float(node.args[0])
    if _is(node, aten.full.default) and all(int(s) == 1 for s in node.args[0]):
        return float(node.args[1])
    return None


def _sqrt_of(node):
    """d's value as text when node is sqrt(d) of a (symbolic) integer d, as dynamic shapes
    write `/ math.sqrt(q.shape[-1])`; else None."""
    node = _through(node, {CAST})
    if not _is(node, aten.sqrt.default):
        return None
    inner = _through(node.args[0], {CAST})
    if not _is(inner, aten.scalar_tensor.default):
        return None
    d = inner.args[0]
    return str(_val(d) if isinstance(d, torch.fx.Node) else d)


def _inverse_sqrt_of(node):
    """d's value as text when node is 1 / sqrt(d), as dynamic shapes write
    `* (1.0 / math.sqrt(q.shape[-1]))`; else None."""
    node = _through(node, {CAST})
    if not _is(node, aten.div.Tensor, aten.true_divide.Tensor):
        return None
    if _constant(_through(node.args[0], {CAST})) != 1.0:
        return None
    return _sqrt_of(node.args[1])


def scores(s):
    """(q, k, scale) when s is q @ k^T (4-D), times or over a constant (or over sqrt of the
    head dim, scale None: SDPA's own default); else None."""
    s = _through(s, VIEWS)
    scale, head_dim = 1.0, None
    if _is(s, aten.div.Tensor, aten.mul.Tensor) and isinstance(s.args[1], (int, float)):
        scale = 1.0 / s.args[1] if s.target == aten.div.Tensor else float(s.args[1])
        s = s.args[0]
    elif _is(s, aten.div.Tensor) and _sqrt_of(s.args[1]) is not None:
        scale, head_dim = None, _sqrt_of(s.args[1])
        s = s.args[0]
    elif _is(s, aten.mul.Tensor) and _inverse_sqrt_of(s.args[1]) is not None:
        scale, head_dim = None, _inverse_sqrt_of(s.args[1])  # * (1.0 / math.sqrt(d))
        s = s.args[0]
    bmm = _through(s)
    if not _is(bmm, aten.bmm.default):
        return None
    q, kt = _through(bmm.args[0]), _through(bmm.args[1])
    if _is(kt, aten.permute.default) and list(kt.args[1]) == [0, 1, 3, 2]:
        k = kt.args[0]
    elif _is(kt, aten.transpose.int) and sorted(d % 4 for d in kt.args[1:]) == [2, 3]:
        k = kt.args[0]
    else:
        return None
    if any(_val(t) is None or _val(t).dim() != 4 for t in (q, k)):
        return None
    if head_dim is not None and head_dim != str(_val(q).shape[-1]):
        return None
    return q, k, scale


def _index(node):
    """("col" | "row", length) for unsqueeze(iota(L), -2 | -1), iota from 0 by 1; else None."""
    if not (_is(node, aten.unsqueeze.default) and _is(node.args[0], prims.iota.default)):
        return None
    iota = node.args[0]
    if iota.kwargs.get("start", 0) != 0 or iota.kwargs.get("step", 1) != 1:
        return None
    length = iota.args[0]
    length = _val(length) if isinstance(length, torch.fx.Node) else length
    kind = {-2: "col", 0: "col", -1: "row", 1: "row"}.get(node.args[1])
    return (kind, str(length)) if kind else None


def causal_form(cond, seq: str):
    """ "masked" when cond is True exactly where column - row >= 1 on a seq x seq grid, "keep"
    when exactly where column - row <= 0, else None."""
    negate = False
    while _is(cond, aten.logical_and.default, aten.logical_not.default, aten.bitwise_not.default):
        if cond.target != aten.logical_and.default:  # ~mask
            negate, cond = not negate, cond.args[0]
            continue
        a, b = cond.args  # mask & all-True, as triu/tril of ones decompose
        if _is(b, aten.full.default) and b.args[1] is True:
            cond = a
        elif _is(a, aten.full.default) and a.args[1] is True:
            cond = b
        else:
            return None
    ops = {aten.ge.Scalar: "ge", aten.gt.Scalar: "gt", aten.le.Scalar: "le", aten.lt.Scalar: "lt"}
    if cond.target not in ops or not _is(cond.args[0], aten.sub.Tensor):
        return None
    op, bound = ops[cond.target], cond.args[1]
    left, right = (_index(n) for n in cond.args[0].args)
    if not left or not right or {left[0], right[0]} != {"col", "row"}:
        return None
    if left[1] != seq or right[1] != seq:
        return None
    if left[0] == "row":  # row - col: flip to col - row
        op, bound = {"ge": "le", "gt": "lt", "le": "ge", "lt": "gt"}[op], -bound
    low = {"ge": bound, "gt": bound + 1}.get(op)  # col - row >= low
    high = {"le": bound, "lt": bound - 1}.get(op)  # col - row <= high
    form = "masked" if low == 1 else "keep" if high == 0 else None
    if form and negate:
        form = {"masked": "keep", "keep": "masked"}[form]
    return form


class NaiveToSdpa(CustomGraphPass):
    """The pass object: callable on the graph, with a uuid for Inductor's FX cache key."""

    def __init__(self):
        self.matches = 0
        self.rewrites: list[str] = []  # "is_causal" or "attn_mask", one per rewrite

    def uuid(self):
        import hashlib

        with open(__file__, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()

    def __call__(self, graph: torch.fx.Graph) -> None:
        for node in list(graph.nodes):
            if _is(node, aten.bmm.default) and self._rewrite(graph, node):
                self.matches += 1
        graph.eliminate_dead_code()

    def _rewrite(self, graph, bmm) -> bool:
        out = next(iter(bmm.users)) if len(bmm.users) == 1 else None
        if not _is(out, aten.view.default) or _val(out) is None or _val(out).dim() != 4:
            return False
        x = softmax_input(_through(bmm.args[0]))
        v = _through(bmm.args[1])
        if x is None or _val(v) is None or _val(v).dim() != 4:
            return False
        shape = str(tuple(_val(x).shape[-2:]))
        x = _through(x, VIEWS)  # in-place code views the scores between the ops
        if not _is(x, aten.where.self) or str(tuple(_val(x).shape[-2:])) != shape:
            return False
        cond, a, b = x.args
        fill_a, fill_b = _constant(a), _constant(b)
        if fill_a is not None and fill_b is None:  # where(mask, fill, S): masked_fill
            fill, s, masked = fill_a, b, True
        elif fill_b is not None and fill_a is None:  # where(keep, S, fill)
            fill, s, masked = fill_b, a, False
        else:
            return False
        found = scores(s)
        if found is None:
            return False
        q, k, scale = found
        qv, kv = _val(q), _val(k)
        seq = str(qv.shape[-2])
        if str(kv.shape[-2]) != seq or str(_val(s).shape[-1]) != seq:
            return False
        floor = torch.finfo(_val(s).dtype).min
        form = causal_form(cond, seq)
        kwargs = {"dropout_p": 0.0, "scale": scale}
        with graph.inserting_before(out):
            is_bool = _val(cond) is not None and _val(cond).dtype == torch.bool
            if form == ("masked" if masked else "keep") and fill <= floor:
                kwargs["is_causal"] = True
            elif fill == float("-inf") and is_bool:
                mask = cond
                if masked:  # SDPA's boolean mask says who takes part
                    mask = graph.call_function(aten.logical_not.default, (cond,))
                    mask.meta["val"] = _val(cond)
                kwargs["attn_mask"] = mask
            else:
                return False
            kind = "is_causal" if kwargs.get("is_causal") else "attn_mask"
            sdpa = _inline_sdpa(graph, q, k, v, kwargs)
        out.replace_all_uses_with(sdpa)
        self.rewrites.append(kind)
        return True


def _inline_sdpa(graph, q, k, v, kwargs):
    """Insert scaled_dot_product_attention as the backend op SDPA picks for these inputs
    (Inductor lowers that op, not the composite one): trace it on the graph's fake tensors with
    make_fx and copy the traced nodes in; returns the node holding the output."""
    import torch.nn.functional as F
    from torch._guards import detect_fake_mode
    from torch._subclasses import FakeTensorMode
    from torch.fx.experimental.proxy_tensor import make_fx

    mask = kwargs.pop("attn_mask", None)
    tensors = [q, k, v] + ([mask] if mask is not None else [])

    def sdpa(q, k, v, *mask):
        attn_mask = mask[0] if mask else None
        return F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, **kwargs)

    vals = [_val(t) for t in tensors]
    try:  # Inductor's graph: fake tensors of one mode (and one shape environment): trace in it
        mode = detect_fake_mode(vals)
    except AssertionError:  # a graph whose nodes carry fake tensors of several modes
        mode = None
    if mode is None:  # concrete shapes: stand-ins of the same layout in a mode of our own
        mode = FakeTensorMode()
        with mode:
            vals = [torch.empty_strided(v.shape, v.stride(), dtype=v.dtype, device=v.device)
                    for v in vals]  # fmt: skip
    with mode:
        traced = make_fx(sdpa, tracing_mode="real")(*vals)
    inputs = [n for n in traced.graph.nodes if n.op == "placeholder"]
    env = dict(zip(inputs, tensors))
    result = None
    for node in traced.graph.nodes:
        if node.op == "call_function":
            env[node] = graph.node_copy(node, lambda n: env[n])
        elif node.op == "output":
            output = node.args[0]
            result = env[output[0] if isinstance(output, (tuple, list)) else output]
    return result


def make_pass() -> NaiveToSdpa:
    """The factory `--pass naive-to-sdpa` calls."""
    return NaiveToSdpa()
