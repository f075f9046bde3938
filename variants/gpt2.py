"""GPT-2's forward (transformers' GPT2Model, GPT2Config defaults: 12 layers, 768 wide, 12 heads,
causal, random weights). Shape BxS: batch x tokens (at most 1024)."""

import torch

from compilekit.model.workload import Workload
from compilekit.variants.models import build_inputs, config_with, own_reference

DESCRIPTION = "transformers GPT2Model forward, GPT2Config defaults (12 layers, 768 wide)"
ATTENTION = ("sdpa", "eager", "flex_attention")
CAUSAL = True  # compilekit's causal attention variants can be plugged in (@triton-flash)


def workload(shape, dtype: str, device: str, attention: str = "sdpa", **config) -> Workload:
    """GPT2Model at GPT2Config defaults (or overrides), fed random token ids."""
    from transformers import GPT2Config, GPT2Model

    cfg = config_with(GPT2Config, attention, **config)
    model = GPT2Model(cfg).to(device=device, dtype=getattr(torch, dtype))
    ids, mask = build_inputs(shape, cfg, device)
    inputs = {"input_ids": ids, "attention_mask": mask}
    return Workload(model, inputs, reference_config=own_reference(attention))
