"""The part of a tensor an indexing op touches: a gathered table's rows, a slice, a cache's slots.

A kernel's bytes count each tensor it takes once, whole (profiling.launcher_bytes from the
launching op's tensors, codecost from its call in Inductor's output code). An embedding takes
its whole table and reads the rows its indices name: counted whole, Llama-2-7B's 32,000-row
table would make a one-token gather read 262 MB, many times any device's copy bandwidth.
Here, for an eager op from its recorded shapes (eager_touched), and for a compiled kernel from
the post-grad graph's nodes fused into it (untouched_bytes), what it touches of such a tensor,
so the roofline counts that part.
"""

from __future__ import annotations

import functools
import math
import re

from compilekit.evidence.codecost import ANNOTATED_RE, GRAPH_DTYPE_BYTES, dims

# Post-grad ops that touch part of their first argument: a gather's or a slice's output is what
# it reads of it; an in-place write touches as much as the values it writes (its last argument),
# and its result is the whole tensor again
PARTIAL_READS = ("embedding", "index_select", "gather", "index", "slice", "select")
PARTIAL_WRITES = ("index_put_", "index_copy_")
NODE_RE = re.compile(
    r'^\s*(?P<node>\w+)(?:: "(?P<dtype>[a-z]+\d*)\[(?P<shape>[^\]]*)\][^"]*")? = '
    r"torch\.ops\.aten\.(?P<op>\w+)\.\w+\((?P<args>.*)\)",
    re.MULTILINE,
)
UNTOUCHED_FROM = (
    "less the part of a gathered table, a sliced tensor or a cache written in place that it "
    "does not touch (the post-grad graph's nodes fused into it)"
)


def untouched_bytes(post_grad_graph: str, nodes: list[str], names: list[str]) -> int:
    """Bytes of the graph inputs among `names` (a kernel's arguments) that the kernel does not
    touch, by the post-grad `nodes` fused into it: an input that only partial ops (PARTIAL_READS,
    PARTIAL_WRITES) take there as their first argument counts what they touch, not its whole
    size. 0 where none does."""
    inputs, found, annotated = _parsed(post_grad_graph)
    uses = {n: set(re.findall(r"\w+", found[n]["args"])) for n in nodes if n in found}
    total = 0
    for name in (n for n in names if n in inputs):
        users = [n for n in uses if name in uses[n]]
        parts = [n for n in users if _first_arg(found[n]["args"]) == name]
        only_partial = all(found[n]["op"] in PARTIAL_READS + PARTIAL_WRITES for n in parts)
        # a write's result is the whole tensor: a node of the kernel that reads it reads it all
        writes = [n for n in parts if found[n]["op"] in PARTIAL_WRITES]
        whole = any(w in uses[n] for w in writes for n in uses)
        if not parts or len(parts) < len(users) or not only_partial or whole:
            continue
        touched = [_touched(found[n], annotated) for n in parts]
        full, size = dims(inputs[name]["shape"]), GRAPH_DTYPE_BYTES.get(inputs[name]["dtype"])
        if None in touched or full is None or size is None:
            continue
        total += max(0, math.prod(full) - sum(touched)) * size
    return total


@functools.lru_cache(maxsize=4)
def _parsed(post_grad_graph: str) -> tuple[dict, dict, dict]:
    """(its inputs, its aten nodes, every annotated name) of a printed post-grad graph, parsed
    once for all its kernels (Llama-2-7B's graph has a thousand)."""
    found = re.search(r"^\s*def forward\(self.*$", post_grad_graph, re.MULTILINE)
    signature = found.group(0) if found else ""
    return (
        {m["node"]: m for m in ANNOTATED_RE.finditer(signature)},
        {m["node"]: m for m in NODE_RE.finditer(post_grad_graph)},
        {m["node"]: m for m in ANNOTATED_RE.finditer(post_grad_graph)},
    )


def _first_arg(args: str) -> str:
    return re.match(r"\s*(\w*)", args).group(1)


def _touched(node, annotated: dict) -> int | None:
    """Elements of its first argument a partial node touches: its output's, or the values an
    in-place write writes (its last argument, a node of the graph)."""
    if node["op"] in PARTIAL_READS:
        shape = dims(node["shape"]) if node["shape"] is not None else None
        return math.prod(shape) if shape is not None else None
    last = re.search(r"(\w+)\s*$", node["args"])
    values = annotated.get(last.group(1)) if last else None
    shape = dims(values["shape"]) if values else None
    return math.prod(shape) if shape is not None else None


# Eager ops that touch part of their first tensor: where, in their recorded shapes, the tensor
# whose elements say how much (its index, or the values written), and whether the op allocates
# an output of the part it reads (which the profiler does not record)
EAGER_PARTIAL = {
    "aten::embedding": (1, True),  # (weight, indices): indices x the row width
    "aten::index_select": (2, True),  # (self, dim, index): index x a slice along dim
    "aten::gather": (2, True),  # (self, dim, index): one element per index
    "aten::index_copy_": (3, False),  # (self, dim, index, source)
    "aten::index_put_": (2, False),  # (self, indices, values, accumulate)
}


def eager_touched(name: str, shapes: list, concrete: list) -> tuple[int, int] | None:
    """(elements of its first tensor an eager op touches, elements of the output it allocates)
    for an EAGER_PARTIAL op whose recorded shapes (and, for index_select, its dim among the
    concrete inputs) say; None for any other op. What it reads is at most its table (BERT's
    two token-type rows gathered 128 times are read once), what it writes is one element per
    index however small the table."""
    if name not in EAGER_PARTIAL or not shapes or not _is_shape(shapes[0]) or not shapes[0]:
        return None
    at, allocates = EAGER_PARTIAL[name]
    if len(shapes) <= at or not _is_shape(shapes[at]):
        return None
    count, table = math.prod(shapes[at]), shapes[0]
    if name == "aten::embedding":
        count *= table[-1]
    elif name == "aten::index_select":
        dim = concrete[1] if len(concrete) > 1 else None
        if not isinstance(dim, int) or not -len(table) <= dim < len(table) or not table[dim]:
            return None
        count *= math.prod(table) // table[dim]
    return min(count, math.prod(table)), count if allocates else 0


def _is_shape(recorded: object) -> bool:
    return isinstance(recorded, list) and all(isinstance(d, int) for d in recorded)
