"""What share of a model's device time attention takes, and the rest split into matmuls, norms
and activations, and other: from the kernel map, so eager and compiled cells (and
compilekit.profile()) are read alike.

A kernel's time is split evenly between its origin lines (the innermost line of each op fused
into it), as the kernel map's per-line view splits it. A line is attention's when the class or
function around it in its file is named for attention (`BertSelfAttention`, `LlamaAttention`,
`eager_attention_forward`, `sdpa_attention_forward`, a compilekit variant's `attention`) or for
the rotary positions it applies (`apply_rotary_pos_emb`, `rotate_half`), or when the line itself
calls attention (`scaled_dot_product_attention`, whose GEMMs and softmax Inductor may write out
in a user's own block, `flex_attention`, `flash_attn_*`); a norm's or an
activation's likewise (`LlamaRMSNorm`, `GELUActivation`). Any other line goes by the kernel:
attention where it is an attention kernel (SDPA's, flash, cuDNN's, flex, ours) or where its
only op was called from attention code, matmuls where its ops or name are a GEMM's (not a
generated kernel named for a matmul whose ops hold none: misnamed_matmul), norms and
activations where its ops are or its line calls the model's activation (`self.act(x)`), else
other.
"""

from __future__ import annotations

import ast
import functools
import re

PARTS = ("attention", "matmuls", "norms_activations", "other")
PART_WORDS = {
    "attention": "attention",
    "matmuls": "matmuls",
    "norms_activations": "norms and activations",
    "other": "other",
}
ATTENTION_SCOPE = re.compile(r"attention|attn|rotary|rotate|rope", re.IGNORECASE)
NORM_ACT_SCOPE = re.compile(r"norm|activation|gelu|silu|swiglu|act_fn", re.IGNORECASE)
# an attention kernel (SDPA's backends, flex, ours) or an attention op
ATTENTION_KERNEL = re.compile(r"attention|scaled_dot_product|flash|fmha|sdpa|_attn_fwd", re.I)
# a GEMM's kernel (cuBLAS, cuBLASLt's nvjet, CUTLASS) or a matmul op
GEMM_RE = re.compile(
    r"(^|[.:_])(addmm|mm|bmm|baddbmm|matmul|linear|addmv|mv)($|[._])|gemm|gemv|nvjet|cutlass|"
    r"xmma|cublas|splitkreduce",
    re.IGNORECASE,
)


def library_class(text: str) -> str:
    """attention, gemm or other: what a library kernel's name, or a call site's ops, are
    (kernelmap matches a CUDA-graph replay's kernels to call sites of their class)."""
    if ATTENTION_KERNEL.search(text):
        return "attention"
    return "gemm" if GEMM_RE.search(text) else "other"


# a library's second kernel for one call: cuBLASLt's split-K reduction after its GEMM, cuDNN's
# reduction after its attention kernel (kernelmap gives it that kernel's call site)
HELPER_KERNEL = re.compile(r"splitkreduce|cudnn::fusion|lean_reduction", re.IGNORECASE)


NORM_ACT_OPS = re.compile(
    r"norm|gelu|silu|relu|tanh|sigmoid|softmax|erf|rsqrt|hardswish|mish", re.IGNORECASE
)


@functools.lru_cache(maxsize=64)
def _scopes(path: str) -> tuple:
    """(first line, last line, name) of every class and function in a file, innermost last
    where they nest; () where the file cannot be read (a run from another machine)."""
    try:
        with open(path) as f:
            tree = ast.parse(f.read(), path)
    except (OSError, SyntaxError, ValueError):
        return ()
    kinds = (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    found = [(n.lineno, n.end_lineno, n.name) for n in ast.walk(tree) if isinstance(n, kinds)]
    return tuple(sorted(found))


def names_around(path: str, line: int) -> list[str]:
    """The names of the classes and functions a line sits in, outermost first."""
    return [name for first, last, name in _scopes(path) if first <= line <= last]


# a line that calls attention itself: Inductor may decompose SDPA into GEMMs and a softmax
ATTENTION_CALL = re.compile(r"scaled_dot_product_attention|flex_attention|flash_attn_\w*\(")


# a line that calls the model's activation module: GPT-2's tanh GELU runs eagerly as a pow, muls,
# adds and a tanh, each its own kernel charged to the MLP's `self.act(...)` line (a GEMM on
# that line stays a matmul: this is asked only of a kernel that is no GEMM)
ACTIVATION_CALL = re.compile(r"\bself\.(act|act_fn|activation(_fn|_function)?)\(")


def line_part(line: dict) -> str | None:
    """attention, norms_activations, or None where the code around the line (or, for
    attention, the line's own call) says neither."""
    names = " ".join(names_around(line["file"], line["line"]))
    if ATTENTION_SCOPE.search(names) or ATTENTION_CALL.search(line.get("code") or ""):
        return "attention"
    if NORM_ACT_SCOPE.search(names):
        return "norms_activations"
    return None


# Inductor names a kernel after every node fused into it, and writes a one-row matmul as a
# multiply and a sum: its fused ops hold that sum or a matmul
MATMUL_OPS = {"aten.mm", "aten.addmm", "aten.bmm", "aten.baddbmm", "aten.sum"}


def misnamed_matmul(record: dict) -> bool:
    """A generated kernel whose name carries a matmul's (`..._add_mean_mm_pow_13`) but whose
    fused ops hold no matmul nor a one-row matmul's sum: a norm's variance over a matmul's
    output, which reads no weight."""
    ops = set(record.get("aten_ops") or ())
    generated = record["name"].startswith(("triton_", "cpp_"))
    return generated and bool(ops) and not ops & MATMUL_OPS


def kernel_part(record: dict) -> str:
    """A kernel's part by what it is: its name, its ATen ops, and for a kernel of one op, the
    code that called the op."""
    words = " ".join([record["name"], record.get("launcher") or "", *record["aten_ops"]])
    if ATTENTION_KERNEL.search(words):
        return "attention"
    origins = record.get("origin_lines") or []
    if len(origins) <= 1 and any(line_part(f) == "attention" for f in record["source_lines"]):
        return "attention"
    if GEMM_RE.search(words) and not misnamed_matmul(record):
        return "matmuls"
    if NORM_ACT_OPS.search(" ".join(record["aten_ops"]) or record["name"]):
        return "norms_activations"
    if any(ACTIVATION_CALL.search(f.get("code") or "") for f in origins):
        return "norms_activations"
    return "other"


def shares(records: list[dict]) -> dict | None:
    """{part: share of the device time} over PARTS (they sum to 1), "device_ms" (per forward,
    what was shared out) and "by": "code" where the map gave source lines, "kernels" where it
    gave none (compilekit.profile() without lines: attention is then its kernels alone, a
    projection a matmul); None where no kernel took time."""
    per = dict.fromkeys(PARTS, 0.0)
    by = "code" if any(rec["source_lines"] for rec in records) else "kernels"
    for rec in records:
        ms = rec["device_ms"] * rec["calls_per_forward"]
        origins = rec.get("origin_lines") or rec["source_lines"][:1]
        parts = [line_part(ln) or kernel_part(rec) for ln in origins] or [kernel_part(rec)]
        for part in parts:
            per[part] += ms / len(parts)
    total = sum(per.values())
    if not total:
        return None
    return {part: ms / total for part, ms in per.items()} | {"device_ms": total, "by": by}


def shares_line(found: dict | None) -> str | None:
    """'attention 41% of the device time (matmuls 38%, norms and activations 9%, other 12%)'."""
    if not found:
        return None
    rest = ", ".join(f"{PART_WORDS[p]} {found[p]:.0%}" for p in PARTS[1:])
    alone = "; by kernel alone: no source lines" if found.get("by") == "kernels" else ""
    return f"attention {found['attention']:.0%} of the device time ({rest}{alone})"
