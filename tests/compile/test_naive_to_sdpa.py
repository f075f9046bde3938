"""The shipped `naive-to-sdpa` pass: which forms it rewrites, what it proves, what it leaves."""

import math

import pytest
import torch

from compilekit.compile.passlib.naive_to_sdpa import make_pass
from compilekit.measure.inputs import ERROR_BOUNDS, max_rel_err

aten = torch.ops.aten
SDPA_OPS = ("_scaled_dot_product",)


def _triu_masked_fill(q, k, v):  # the blog's form, mask built in the call
    s = q.shape[-2]
    mask = torch.triu(torch.ones(s, s, dtype=torch.bool, device=q.device), diagonal=1)
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
    return torch.softmax(scores.masked_fill(mask, float("-inf")), dim=-1) @ v


def _scale_finfo_not_tril(q, k, v):  # * scale, finfo.min, ~tril
    s = q.shape[-2]
    keep = torch.tril(torch.ones(s, s, dtype=torch.bool, device=q.device))
    scores = torch.matmul(q, k.transpose(-2, -1)) * 0.25
    scores = scores.masked_fill(~keep, torch.finfo(scores.dtype).min)
    return torch.matmul(torch.softmax(scores, dim=-1), v)


def _where_keep(q, k, v):  # torch.where(tril, scores, -inf)
    s = q.shape[-2]
    keep = torch.ones(s, s, dtype=torch.bool, device=q.device).tril()
    scores = q @ k.transpose(-2, -1) * q.shape[-1] ** -0.5
    return torch.softmax(torch.where(keep, scores, float("-inf")), dim=-1) @ v


def _input_mask(q, k, v, mask):  # the blog's cached mask, passed in: no proof possible
    scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(q.shape[-1]))
    return torch.softmax(scores.masked_fill(mask, float("-inf")), dim=-1) @ v


def _off_by_one(q, k, v):  # triu(diagonal=2): not causal, and finfo.min: left alone
    s = q.shape[-2]
    mask = torch.triu(torch.ones(s, s, dtype=torch.bool, device=q.device), diagonal=2)
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
    return torch.softmax(scores.masked_fill(mask, torch.finfo(q.dtype).min), dim=-1) @ v


def _other_dim(q, k, v):  # softmax over the queries: not attention as SDPA computes it
    s = q.shape[-2]
    mask = torch.triu(torch.ones(s, s, dtype=torch.bool, device=q.device), diagonal=1)
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
    return torch.softmax(scores.masked_fill(mask, float("-inf")), dim=-2) @ v


def _inputs(dtype, with_mask=False):
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 3, 40, 16, generator=g).to(dtype) for _ in "qkv")
    if with_mask:
        return q, k, v, torch.triu(torch.ones(40, 40, dtype=torch.bool), 1)
    return q, k, v


def _rewrite(fn, args, tracing_mode="real"):
    """fn traced to ATen as Inductor decomposes it, the pass applied; (graph module, pass)."""
    from torch._inductor.decomposition import select_decomp_table
    from torch.fx.experimental.proxy_tensor import make_fx

    gm = make_fx(fn, decomposition_table=select_decomp_table(), tracing_mode=tracing_mode)(*args)
    graph_pass = make_pass()
    graph_pass(gm.graph)
    gm.recompile()
    return gm, graph_pass


def _sdpa_nodes(gm):
    return [
        n
        for n in gm.graph.nodes
        if n.op == "call_function" and "_scaled_dot_product" in str(n.target)
    ]


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize(
    "fn, kind",
    [
        (_triu_masked_fill, "is_causal"),
        (_scale_finfo_not_tril, "is_causal"),
        (_where_keep, "is_causal"),
        (_input_mask, "attn_mask"),
    ],
)
def test_forms_become_one_sdpa_within_the_dtype_bound(fn, kind, dtype):
    args = _inputs(getattr(torch, dtype), with_mask=fn is _input_mask)
    gm, graph_pass = _rewrite(fn, args)
    assert graph_pass.matches == 1 and graph_pass.rewrites == [kind]
    assert len(_sdpa_nodes(gm)) == 1
    assert not [n for n in gm.graph.nodes if n.target in (aten.bmm.default, aten.amax.default)]
    truth = fn(*(a.double() if a.is_floating_point() else a for a in args))
    assert max_rel_err(gm(*args), truth) < ERROR_BOUNDS[dtype]


@pytest.mark.parametrize("fn", [_off_by_one, _other_dim])
def test_what_it_cannot_prove_stays_as_it_is(fn):
    args = _inputs(torch.float32)
    gm, graph_pass = _rewrite(fn, args)
    assert graph_pass.matches == 0 and not _sdpa_nodes(gm)
    assert max_rel_err(gm(*args), fn(*args)) < 1e-5  # the same ops, decomposed


def test_dynamic_shapes_in_a_real_compile():
    """torch.compile(dynamic=True) on the CPU: the pass fires at joint_custom_pre_pass, for two
    sequence lengths from one graph."""
    from torch._inductor import config

    def times_inverse_sqrt(q, k, v, mask):  # naive's own scale, with its mask passed in
        scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(q.shape[-1]))
        return torch.softmax(scores.masked_fill(mask, float("-inf")), dim=-1) @ v

    graph_pass = make_pass()
    with config.patch(joint_custom_pre_pass=graph_pass, fx_graph_cache=False):
        for fn in (_triu_masked_fill, times_inverse_sqrt):
            compiled = torch.compile(fn, dynamic=True)
            for seq in (40, 72):
                q, k, v = (torch.randn(1, 2, seq, 16) for _ in "qkv")
                mask = (torch.triu(torch.ones(seq, seq, dtype=torch.bool), 1),)
                mask = mask if fn is times_inverse_sqrt else ()
                truth = fn(q.double(), k.double(), v.double(), *mask)
                assert max_rel_err(compiled(q, k, v, *mask), truth) < ERROR_BOUNDS["float32"]
    torch._dynamo.reset()
    assert set(graph_pass.rewrites) == {"is_causal", "attn_mask"}, graph_pass.rewrites
