"""SDPA pinned to the math backend with torch.nn.attention.sdpa_kernel (the blog's
--backend math)."""

from torch.nn.attention import SDPBackend

from compilekit.variants.masks import causal_flops as flops  # noqa: F401  (FLOPs this variant does)
from compilekit.variants.sdpa import pinned

DESCRIPTION = "F.scaled_dot_product_attention pinned to SDPBackend.MATH"

attention = pinned(SDPBackend.MATH)


if __name__ == "__main__":  # this variant alone: its time and error at the default shape
    from compilekit.variants.standalone import main

    raise SystemExit(main(__file__, attention, globals().get("reference")))
