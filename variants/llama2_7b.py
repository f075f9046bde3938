"""Llama-2-7B as a causal LM (transformers' LlamaForCausalLM at its dimensions: 32 layers, 4096
wide, 32 heads, SwiGLU MLP 11008, 32,000-token vocabulary; random weights, 13.5 GB in bf16).
Shape BxS: one forward over random token ids; BxP+N: a decode of N tokens after a P-token
prompt (compilekit/measure/decode)."""

from compilekit.model.workload import Workload
from compilekit.variants.models import LLAMA2_7B, causal_lm

DESCRIPTION = "transformers LlamaForCausalLM at Llama-2-7B's dimensions (32 layers, MHA)"
ATTENTION = ("sdpa", "eager", "flex_attention")
CAUSAL = True

DIMENSIONS = {**LLAMA2_7B, "num_hidden_layers": 32, "vocab_size": 32000}


def workload(shape, dtype: str, device: str, attention: str = "sdpa", **config) -> Workload:
    """The model (config overrides: tests use tiny ones) and its prompt's token ids."""
    return causal_lm({**DIMENSIONS, **config}, attention, shape, dtype, device)
