"""Llama-3-8B as a causal LM (transformers' LlamaForCausalLM at its dimensions: 32 layers, 4096
wide, GQA 32/8 heads, SwiGLU MLP 14336, 128,256-token vocabulary; random weights, 16 GB in
bf16). Shape BxS: one forward; BxP+N: a decode of N tokens after a P-token prompt."""

from compilekit.model.workload import Workload
from compilekit.variants.models import LLAMA3_8B, causal_lm

DESCRIPTION = "transformers LlamaForCausalLM at Llama-3-8B's dimensions (32 layers, GQA 32/8)"
ATTENTION = ("sdpa", "eager", "flex_attention")
CAUSAL = True

DIMENSIONS = {**LLAMA3_8B, "num_hidden_layers": 32, "vocab_size": 128256}


def workload(shape, dtype: str, device: str, attention: str = "sdpa", **config) -> Workload:
    """The model (config overrides: tests use tiny ones) and its prompt's token ids."""
    return causal_lm({**DIMENSIONS, **config}, attention, shape, dtype, device)
