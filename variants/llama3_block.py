"""One Llama decoder layer at Llama-3-8B's dimensions (4096 wide, 32 query heads sharing 8 K/V
heads, SwiGLU MLP 14336, rope theta 500000), as variants/llama_block.py runs it."""

from compilekit.variants import llama_block
from compilekit.variants.models import LLAMA3_8B

DESCRIPTION = "transformers LlamaDecoderLayer at Llama-3-8B's dimensions (GQA 32/8)"
ATTENTION = llama_block.ATTENTION
CAUSAL = True


def workload(shape, dtype: str, device: str, attention: str = "sdpa", **config):
    return llama_block.workload(shape, dtype, device, attention, **{**LLAMA3_8B, **config})
