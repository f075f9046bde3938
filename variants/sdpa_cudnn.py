"""SDPA pinned to the cudnn backend with torch.nn.attention.sdpa_kernel (the blog's
--backend cudnn)."""

from torch.nn.attention import SDPBackend

from compilekit.variants.masks import causal_flops as flops  # noqa: F401  (FLOPs this variant does)
from compilekit.variants.sdpa import pinned

DESCRIPTION = "F.scaled_dot_product_attention pinned to SDPBackend.CUDNN_ATTENTION"

attention = pinned(SDPBackend.CUDNN_ATTENTION)


if __name__ == "__main__":  # this variant alone: its time and error at the default shape
    from compilekit.variants.standalone import main

    raise SystemExit(main(__file__, attention, globals().get("reference")))
