"""The bytes and FLOPs of each kernel call in Inductor's output code, read from the wrapper.

The profiler gives a kernel its bytes from the tensors its launching op recorded. Two kinds of
launch record none: the kernels a CUDA-graph replay runs (reduce-overhead, max-autotune on a GPU)
and Inductor's C++ kernels on a CPU. Their call sites in the output code name every tensor they
read and write, with its size and dtype (`empty_strided_*`, `reinterpret_tensor`, the inputs'
`rand_strided`), so the roofline can place them too; where a launch did record bytes that
differ, the call's figure wins (kernelmap._costs). Each call site is keyed by the provenance
handle Inductor writes above it (`extern_kernels.bmm:1`), the key kernelmap.provenance_index
uses.

A site counts only where every tensor it touches is an argument: a kernel launch (Triton's
`.run`, a C++ kernel) or an extern call with `out=`. A call that returns a new tensor (a
fallback op: `buf1 = torch.ops.aten.x(...)`) gets nothing, and a symbolic size (dynamic
shapes) has no number: those sites get nothing rather than a partial figure. What a fallback
returns is sized by the op's meta function (evidence/returned.py), for the sites after it that
read it.

A matmul template (max-autotune's Triton or C++ GEMM) takes its operands as kernel arguments,
not as a matmul call's: its FLOPs come from the matmuls of the post-grad graph that provenance
maps into it. An SDPA fallback returns its output: its bytes and FLOPs come from its SDPA node
in that graph, its shapes and is_causal (site_costs).

A kernel that touches part of an input it takes whole (a gather's table) is counted less that
part: evidence/partial.py.
"""

from __future__ import annotations

import ast
import bisect
import math
import re

import torch

from compilekit.evidence import returned

CODE_BYTES_FROM = (
    "its call in Inductor's output code: each tensor argument moved once (a lower bound)"
)
CODE_FLOPS_FROM = "its call in Inductor's output code: 2 x M x N x K of the matmul's arguments"
# why a call site has no bytes (kernels.json's bytes_unknown; bytes_unknown_at names the tensor)
UNSIZED = "its call in Inductor's output code takes a tensor the code gives no size"
RETURNS = "its call in Inductor's output code returns its result, which the code gives no size"
HANDLE_RE = re.compile(r"#\s*\[Provenance debug handles\]\s*(?P<handles>.+)$")
# what Inductor names the tensors of its wrapper: one it cannot size leaves a site unknown
TENSOR_NAME_RE = re.compile(r"^(arg|buf|primals|tangents)\w*\d$")
ALLOCATORS = ("empty_strided", "rand_strided")
GRAPH_FLOPS_FROM = "the matmuls fused into it in the post-grad graph: 2 x M x N x K each"
# extern matmuls: the position of the first matrix argument (the second follows it)
MATMULS = {"mm": 0, "bmm": 0, "addmm": 1, "baddbmm": 1}
# The SDPA ops that launch one attention kernel (flash, efficient, cuDNN; on a CPU the public
# op is the outermost of its work, a leaf), which torch counts no FLOPs for, and where their
# is_causal argument stands in their schema
SDPA_CAUSAL_AT = {
    "scaled_dot_product_attention": 5,
    "_scaled_dot_product_flash_attention": 4,
    "_scaled_dot_product_flash_attention_for_cpu": 4,
    "_scaled_dot_product_efficient_attention": 6,
    "_scaled_dot_product_cudnn_attention": 6,
}


def attention_flops(q, k, causal) -> int | None:
    """FLOPs of one SDPA call over q [B, H, Q, D] and k [B, H_kv, K, D]: 4·B·H·D per (query,
    key) pair it computes, all Q·K of them (a mask's zeros are computed too), or under
    is_causal those on or below the diagonal, top-left aligned as torch aligns them. None for
    shapes or a flag it cannot read."""
    shapes_ok = isinstance(q, (list, tuple)) and isinstance(k, (list, tuple))
    if not (shapes_ok and len(q) == len(k) == 4 and isinstance(causal, bool)):
        return None
    batch, heads, queries, dim = q
    keys = k[2]
    if not causal:
        pairs = queries * keys
    elif queries <= keys:
        pairs = queries * (queries + 1) // 2
    else:  # the rows past the keys see every key
        pairs = keys * (keys + 1) // 2 + (queries - keys) * keys
    return 4 * batch * heads * dim * pairs


# a post-grad graph's annotated names (`bmm: "f32[8, 512, 512][...]cpu"`, a parameter too),
# and its matmul nodes
ANNOTATED_RE = re.compile(r'(?P<node>\w+): "(?P<dtype>[a-z]+\d*)\[(?P<shape>[^\]]*)\]')
SDPA_NODE_RE = re.compile(
    r"^\s*(?P<node>\w+) = torch\.ops\.aten\.(?P<op>_scaled_dot_product_\w+?)\.default"
    r"\((?P<args>[^)]*)\)",
    re.MULTILINE,
)
# bytes per element of a graph annotation's dtype
GRAPH_DTYPE_BYTES = {"f64": 8, "i64": 8, "f32": 4, "i32": 4, "bf16": 2, "f16": 2, "b8": 1}
GRAPH_SDPA_FROM = (
    "the SDPA node of the post-grad graph: its q, k, v and output moved once, 4·B·H·D FLOPs "
    "per (query, key) pair it computes"
)
MATMUL_NODE_RE = re.compile(
    r'^\s*(?P<node>\w+): "[^"]*" = torch\.ops\.aten\.(?P<op>mm|bmm|addmm|baddbmm)\.default'
    r"\((?P<args>[^)]*)\)",
    re.MULTILINE,
)


def site_costs(graph: dict) -> dict[str, dict]:
    """call_site_costs of one graph's output code, and for a site that provenance maps matmuls
    of the post-grad graph into, their FLOPs ("graph_flops"): a GEMM template's, where its call
    shows no matmul. Provenance also maps into a kernel the nodes whose inputs it prepares (the
    kernel that builds an SDPA op's mask lists that op), so the kernel map gives graph_flops to
    template kernels only."""
    costs = call_site_costs(graph.get("output_code", ""))
    flops = graph_matmul_flops(graph.get("post_grad_graph", ""))
    mapped = ((graph.get("node_mappings") or {}).get("cppCodeToPost")) or {}
    attention = graph_sdpa_costs(graph.get("post_grad_graph", ""))
    for handle, nodes in mapped.items():
        found = [flops[n] for n in nodes if n in flops]
        if found:
            costs[handle] = {**costs.get(handle, {}), "graph_flops": sum(found)}
        # an SDPA fallback's call returns its output: its one SDPA node gives what it does
        own = [attention[n] for n in nodes if n in attention]
        if handle.startswith("torch.ops.aten._scaled_dot_product") and len(own) == 1:
            costs[handle] = {**costs.get(handle, {}), **own[0]}
    return costs


def graph_sdpa_costs(post_grad_graph: str) -> dict[str, dict]:
    """{node: {"sdpa_bytes", "sdpa_flops"}} for each SDPA node of a printed post-grad graph
    whose q, k, v shapes and is_causal it can read: q, k, v and the output (q's rows of v's
    width) each moved once, and attention_flops."""
    annotated = {m["node"]: m for m in ANNOTATED_RE.finditer(post_grad_graph)}
    out = {}
    for m in SDPA_NODE_RE.finditer(post_grad_graph):
        items = [a.strip() for a in m["args"].split(",")]
        positional = [a for a in items if "=" not in a]
        named = dict(tuple(p.strip() for p in a.split("=", 1)) for a in items if "=" in a)
        at = SDPA_CAUSAL_AT.get(m["op"])
        if at is None or len(positional) < 3:
            continue
        flag = positional[at] if len(positional) > at else named.get("is_causal", "False")
        found = [annotated.get(name) for name in positional[:3]]
        if any(a is None for a in found) or flag not in ("True", "False"):
            continue
        q, k, v = (dims(a["shape"]) for a in found)
        size = GRAPH_DTYPE_BYTES.get(found[0]["dtype"])
        flops = attention_flops(q, k, flag == "True") if q and k else None
        if flops is None or v is None or size is None:
            continue
        moved = math.prod(q) + math.prod(k) + math.prod(v) + math.prod(q[:-1] + v[-1:])
        out[m["node"]] = {"sdpa_bytes": moved * size, "sdpa_flops": flops}
    return out


def graph_matmul_flops(post_grad_graph: str) -> dict[str, int]:
    """{node: 2 x M x N x K} for each mm/bmm/addmm/baddbmm node of a printed post-grad graph
    whose output and first operand have integer shapes."""
    shapes = {m["node"]: dims(m["shape"]) for m in ANNOTATED_RE.finditer(post_grad_graph)}
    out = {}
    for m in MATMUL_NODE_RE.finditer(post_grad_graph):
        args = [a.strip() for a in m["args"].split(",")]
        first = MATMULS[m["op"]]
        result = shapes.get(m["node"])
        operand = shapes.get(args[first]) if len(args) > first else None
        if result and operand:
            out[m["node"]] = 2 * math.prod(result) * operand[-1]
    return out


def dims(text: str) -> tuple | None:
    """ "8, 512, 64" -> (8, 512, 64); a symbolic size ("s0") -> None."""
    parts = [p.strip() for p in text.split(",") if p.strip()]
    return tuple(int(p) for p in parts) if parts and all(p.isdigit() for p in parts) else None


def call_site_costs(output_code: str) -> dict[str, dict]:
    """{provenance handle: {"code_args": the names it takes, "code_bytes": int, "code_flops":
    int or None}} for each call site of this output code, the figures only where its tensors
    are all arguments of known size (see the module's docstring); nothing for code that does
    not parse or has no handles, or a call that returns its result."""
    try:
        tree = ast.parse(output_code)
    except SyntaxError:
        return {}
    tensors, why = _tensor_sizes(tree)
    statements = sorted(
        (node for node in ast.walk(tree) if isinstance(node, (ast.Expr, ast.Assign))),
        key=lambda node: node.lineno,
    )
    linenos = [node.lineno for node in statements]
    costs = {}
    for lineno, line in enumerate(output_code.splitlines(), start=1):
        found = HANDLE_RE.search(line)
        if not found:
            continue
        later = statements[bisect.bisect_right(linenos, lineno) :]
        for handle in re.split(r"[,\s]+", found["handles"].strip()):
            call, assigned = _call_of(later, handle.rsplit(":", 1)[0]) if handle else (None, False)
            if assigned:
                costs[handle] = {"code_unknown": RETURNS}
            if call is None:
                continue
            cost = _call_cost(call, tensors, why)
            costs[handle] = {**(cost or {}), "code_args": _tensor_names(call)}
    return costs


def _tensor_names(call: ast.Call) -> list[str]:
    """The wrapper's names of the tensors a call takes (_tensor_name), each once."""
    names = []
    for arg in [*call.args, *(kw.value for kw in call.keywords)]:
        name = _tensor_name(arg)
        if name and name not in names:
            names.append(name)
    return names


def _tensor_name(arg) -> str | None:
    """The wrapper's name of the tensor an argument is (TENSOR_NAME_RE), a view's base for a
    view; None for anything else."""
    while isinstance(arg, ast.Call) and _callee(arg) == "reinterpret_tensor" and arg.args:
        arg = arg.args[0]
    is_tensor = isinstance(arg, ast.Name) and TENSOR_NAME_RE.match(arg.id)
    return arg.id if is_tensor else None


def _callee(call: ast.Call) -> str:
    """The called name's last part: `extern_kernels.bmm` -> `bmm`, `k.run` -> `run`."""
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


def _tensor_sizes(tree) -> tuple[dict[str, tuple[tuple, torch.dtype]], dict[str, str]]:
    """({name: (shape, dtype)} for every tensor the wrapper allocates, views or takes as an
    input, and those an op returns (evidence/returned.py), in source order (a view follows its
    base; names are unique in a graph); {name: why} for those it assigns but cannot size)."""
    sizes: dict[str, tuple[tuple, torch.dtype]] = {}
    why: dict[str, str] = {}
    results: dict[str, object] = {}  # an op's result by its name: a tuple's items are read later
    # allocations first: the inputs' rand_strided stand after the wrapper that views them
    assigns = sorted(
        (n for n in ast.walk(tree) if isinstance(n, ast.Assign) and len(n.targets) == 1),
        key=lambda n: (not _is_allocation(n.value), n.lineno),
    )
    for node in assigns:
        target, value = node.targets[0], node.value
        if not isinstance(target, ast.Name):
            continue
        # buf4 = buf2 (a reuse), a view, or an allocation
        size = _expr_size(value, sizes) or (_allocation(value) if _is_allocation(value) else None)
        if size is None and _is_allocation(value):
            why[target.id] = "a symbolic size (dynamic shapes)"
        elif size is None:
            sized = lambda node: _expr_size(node, sizes)  # noqa: E731
            size, reason = returned.size(value, sized, results, target.id)
            if size is None:
                why[target.id] = reason
        if size is not None:
            sizes[target.id] = size
    return sizes, why


def _is_allocation(value) -> bool:
    return isinstance(value, ast.Call) and _callee(value).startswith(ALLOCATORS)


def _allocation(call: ast.Call) -> tuple[tuple, torch.dtype] | None:
    """empty_strided_cuda((8, 16), (16, 1), torch.bfloat16), or rand_strided(..., dtype=...)."""
    dtype = next((kw.value for kw in call.keywords if kw.arg == "dtype"), None)
    if dtype is None and len(call.args) >= 3:
        dtype = call.args[2]
    shape = _literal_shape(call.args[0]) if call.args else None
    item = getattr(torch, dtype.attr, None) if isinstance(dtype, ast.Attribute) else None
    if shape is None or not isinstance(item, torch.dtype):
        return None
    return shape, item


def _literal_shape(node) -> tuple | None:
    """A tuple of integer literals (a symbolic size: None)."""
    try:
        shape = ast.literal_eval(node)
    except ValueError:
        return None
    if isinstance(shape, tuple) and all(isinstance(d, int) for d in shape):
        return shape
    return None


def _expr_size(node, sizes: dict) -> tuple[tuple, torch.dtype] | None:
    """The (shape, dtype) of a tensor expression: a known name, or a view of one
    (`reinterpret_tensor(buf0, (8, 512, 64), (...), 0)`)."""
    if isinstance(node, ast.Name):
        return sizes.get(node.id)
    is_view = isinstance(node, ast.Call) and _callee(node) == "reinterpret_tensor"
    if is_view and len(node.args) >= 2:
        base, shape = _expr_size(node.args[0], sizes), _literal_shape(node.args[1])
        return (shape, base[1]) if base is not None and shape is not None else None
    return None


def _call_of(statements: list, name: str) -> tuple[ast.Call | None, bool]:
    """(the call a handle names: `extern_kernels.bmm`, a kernel's `name.run`, a C++ kernel's
    `name`; the first among these statements, whether its result is assigned): (None, True)
    for an op that allocates its own output, (None, False) where none is found."""
    for node in statements:
        call = node.value
        if isinstance(call, ast.Call) and ast.unparse(call.func) in (name, name + ".run"):
            return (call, False) if isinstance(node, ast.Expr) else (None, True)
    return None, False


def _call_cost(call: ast.Call, sizes: dict, why: dict) -> dict | None:
    """{"code_bytes", "code_flops"} of one kernel call; {"code_unknown", "code_unknown_at"}
    where a tensor's size is unknown (which one, and why: `why`); None for a matmul that
    returns its result or a call of no tensor."""
    args = [*call.args, *(kw.value for kw in call.keywords if kw.arg not in ("stream",))]
    if _callee(call) in MATMULS and not any(kw.arg == "out" for kw in call.keywords):
        return None
    seen, total = set(), 0
    for arg in args:
        size = _expr_size(arg, sizes)
        if size is None:
            name = _tensor_name(arg)
            if name:  # a tensor it reads or writes (or views) whose size is unknown
                at = f"{name}: {why.get(name, 'an input the output code gives no size')}"
                return {"code_unknown": UNSIZED, "code_unknown_at": at}
            continue
        key = ast.dump(arg)
        if key not in seen:
            seen.add(key)
            total += math.prod(size[0]) * size[1].itemsize
    if not seen:
        return None
    return {"code_bytes": total, "code_flops": _matmul_flops(call, sizes)}


def _matmul_flops(call: ast.Call, sizes: dict) -> int | None:
    """2 x M x N x K (x batch) of an extern mm/bmm/addmm/baddbmm call, else None."""
    first = MATMULS.get(_callee(call))
    if first is None or len(call.args) < first + 2:
        return None
    a, b = (_expr_size(arg, sizes) for arg in call.args[first : first + 2])
    if a is None or b is None or not b[0]:
        return None
    return 2 * math.prod(a[0]) * b[0][-1]
