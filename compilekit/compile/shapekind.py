"""The kind of shape each variant takes, and the one-line refusal of any other: an attention
variant's BxHxSxD (or BxHxQxKxD where it takes a query length apart), a model's BxS or BxP+N,
a varlen variant's ragged batch."""

from __future__ import annotations

from compilekit.model.errors import UserError
from compilekit.variants import ANY_KV_HEADS, ANY_QUERY_LENGTH, VARIANTS, VARLEN


def shape_kind(shape) -> str:
    """ "varlen" (a ragged batch), "model" (BxS or BxP+N) or "attention" (BxHxSxD)."""
    from compilekit.model.spec import Tokens
    from compilekit.model.varlen import Varlen

    if isinstance(shape, Varlen):
        return "varlen"
    return "model" if isinstance(shape, Tokens) else "attention"


def variant_kind(spec: str, workload: bool) -> str:
    """The kind of shape a variant takes (check_variant says whether it is a workload)."""
    if spec in VARLEN:
        return "varlen"
    return "model" if workload else "attention"


SHAPE_WORDS = {
    "model": ("a model", "BxS (batch x tokens, e.g. 8x128)"),
    "attention": ("an attention variant", "BxHxSxD (e.g. 8x16x1024x64)"),
    "varlen": ("a varlen variant", "LENGTHSxHxD (e.g. lognormal512@16384x32g8x128)"),
}


def fits(spec: str, shape, workload: bool) -> bool:
    """Whether the variant takes a shape of this kind."""
    return shape_kind(shape) == variant_kind(spec, workload)


def check_shape(spec: str, shape, workload: bool) -> None:
    """UserError where the shape's kind is not the variant's: BxS for a model workload,
    BxHxSxD for an attention variant, a ragged batch for a varlen variant."""
    kind = variant_kind(spec, workload)
    if shape_kind(shape) != kind:
        what, want = SHAPE_WORDS[kind]
        raise UserError(f"{spec!r} is {what}: give its shape as {want}, not {shape}")
    if getattr(shape, "kv_groups", 0) and spec in VARIANTS and spec not in ANY_KV_HEADS:
        raise UserError(
            f"{spec!r} takes K/V with the query heads, not {shape}: GQA K/V (HgG) run on "
            f"{', '.join(sorted(ANY_KV_HEADS))}"
        )
    if getattr(shape, "kv_seq", 0) and spec in VARIANTS and spec not in ANY_QUERY_LENGTH:
        raise UserError(
            f"{spec!r} takes queries and keys of one length (BxHxSxD), not {shape}: Q queries "
            f"over K keys run on {', '.join(sorted(ANY_QUERY_LENGTH))}"
        )
