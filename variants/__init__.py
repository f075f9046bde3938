"""Attention variants: one implementation per file, `attention(q, k, v) -> Tensor` in [B, H, S, D];
and model workloads (MODELS): `workload(shape, dtype, device) -> Workload` for a BxS shape
(compilekit/model/workload.py says what a factory returns).

A module may also define `reference(q, k, v)` (the float64 truth it is checked against; without
one the built-ins use `compilekit.measure.inputs.causal_reference`) and `DESCRIPTION` (one line).
"""

# name -> module; a new variant is one line here and one file beside this one.
VARIANTS = {
    "naive": "compilekit.variants.naive",
    "naive-inline": "compilekit.variants.naive_inline",
    "inplace": "compilekit.variants.inplace",
    "sdpa": "compilekit.variants.sdpa",
    "sdpa-math": "compilekit.variants.sdpa_math",
    "sdpa-flash": "compilekit.variants.sdpa_flash",
    "sdpa-efficient": "compilekit.variants.sdpa_efficient",
    "sdpa-cudnn": "compilekit.variants.sdpa_cudnn",
    "flex": "compilekit.variants.flex",
    "triton-flash": "compilekit.variants.triton_flash",
    "triton-flash-gqa": "compilekit.variants.triton_flash_gqa",
    "triton-flash-window": "compilekit.variants.triton_flash_window",
    "gluon-flash": "compilekit.variants.gluon_flash",
    "gluon-flash-gqa": "compilekit.variants.gluon_flash_gqa",
    "sdpa-gqa": "compilekit.variants.sdpa_gqa",
    "flex-gqa": "compilekit.variants.flex_gqa",
    "flex-window": "compilekit.variants.flex_window",
}

# Variants that take queries and keys of different lengths (BxHxQxKxD: a few queries over a
# cache, as at decode; causal means bottom-right there). The others build one S x S mask or
# grid, and refuse such a shape before it runs.
ANY_QUERY_LENGTH = {
    "sdpa", "sdpa-math", "sdpa-flash", "sdpa-efficient", "sdpa-cudnn", "sdpa-gqa",
    "flex", "flex-gqa", "triton-flash", "triton-flash-gqa",
}  # fmt: skip

# Variants that take K/V with fewer heads than q (a shape's HgG: G K/V heads, GQA) as they
# are; the others would need the heads repeated, and refuse such a shape before it runs.
ANY_KV_HEADS = {
    "sdpa", "sdpa-math", "sdpa-flash", "sdpa-efficient", "sdpa-cudnn", "sdpa-gqa", "flex",
    "flex-gqa", "triton-flash", "triton-flash-gqa", "triton-flash-window", "gluon-flash",
    "gluon-flash-gqa",
}  # fmt: skip

# name -> module of a varlen variant: a ragged batch of documents (a varlen shape,
# compilekit/model/varlen.py), each variant in its own layout (variants/varlen.py)
VARLEN = {
    "sdpa-padded": "compilekit.variants.sdpa_padded",
    "sdpa-jagged": "compilekit.variants.sdpa_jagged",
    "flex-document": "compilekit.variants.flex_document",
    "varlen-attn": "compilekit.variants.varlen_attn",
    "triton-flash-varlen": "compilekit.variants.triton_flash_varlen",
    "gluon-flash-varlen": "compilekit.variants.gluon_flash_varlen",
}

# name -> module of a model workload (transformers: the `models` extra)
# `model@attention` picks its attention: one of the model's own (its ATTENTION) or a variant above
MODELS = {
    "bert-base": "compilekit.variants.bert_base",
    "gpt2": "compilekit.variants.gpt2",
    "llama-block": "compilekit.variants.llama_block",
    "llama3-block": "compilekit.variants.llama3_block",
    # causal LMs: a BxS forward, or a decode (BxP+N: compilekit/measure/decode)
    "llama2-7b": "compilekit.variants.llama2_7b",
    "llama3-8b": "compilekit.variants.llama3_8b",
}
