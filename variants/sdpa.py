"""The blog's step 3: F.scaled_dot_product_attention, letting PyTorch pick the backend (04_c)."""

import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from compilekit.variants.masks import causal_flops as flops  # noqa: F401  (FLOPs this variant does)
from compilekit.variants.masks import causal_sdpa_kwargs

DESCRIPTION = "F.scaled_dot_product_attention(is_causal=True), backend picked by PyTorch"


def attention(q, k, v):
    return F.scaled_dot_product_attention(q, k, v, **causal_sdpa_kwargs(q, k))


def pinned(backend: SDPBackend):
    """An SDPA attention callable restricted to one backend, as the blog's --backend flag does.

    If the backend cannot run these inputs, PyTorch raises (with warnings that say why); the
    runner records that reason instead of guessing from a list of its own.
    """

    def attention(q, k, v):
        with sdpa_kernel(backend):
            return F.scaled_dot_product_attention(q, k, v, **causal_sdpa_kwargs(q, k))

    attention.__name__ = f"sdpa_{backend.name.lower()}"
    return attention


if __name__ == "__main__":  # this variant alone: its time and error at the default shape
    from compilekit.variants.standalone import main

    raise SystemExit(main(__file__, attention, globals().get("reference")))
