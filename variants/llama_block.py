"""One Llama decoder layer as LlamaModel runs it (transformers' LlamaDecoderLayer at Llama-2-7B's
dimensions: 4096 wide, 32 heads, SwiGLU MLP 11008, RMSNorm, rotary embedding), with the causal
mask transformers builds for its attention implementation. Shape BxS: batch x tokens; the
input is a random [B, S, 4096] hidden state."""

import torch

from compilekit.model.workload import Workload
from compilekit.variants.models import LLAMA2_7B, decoder_block, own_reference

DESCRIPTION = "transformers LlamaDecoderLayer at Llama-2-7B's dimensions (MHA 32 heads)"
ATTENTION = ("sdpa", "eager", "flex_attention")
CAUSAL = True  # compilekit's causal attention variants can be plugged in (@triton-flash)


def workload(shape, dtype: str, device: str, attention: str = "sdpa", **config) -> Workload:
    """The block (config overrides: tests use tiny ones) and its [B, S, hidden] input."""
    block = decoder_block({**LLAMA2_7B, **config}, attention)
    block = block.to(device=device, dtype=getattr(torch, dtype))
    hidden = torch.randn(shape.batch, shape.seq, block.config.hidden_size)
    hidden = hidden.to(device=device, dtype=getattr(torch, dtype))
    return Workload(block, (hidden,), reference_config=own_reference(attention))
