"""BERT-base's forward (transformers' BertModel, BertConfig defaults, random weights): the
model the write-ups behind compilekit measure torch.compile on. Shape BxS: batch x tokens."""

import torch

from compilekit.model.workload import Workload
from compilekit.variants.models import build_inputs, config_with

DESCRIPTION = "transformers BertModel forward, BertConfig defaults (12 layers, 768 wide)"
ATTENTION = ("sdpa", "eager")  # transformers' own implementations BertModel offers


def workload(shape, dtype: str, device: str, attention: str = "sdpa", **config) -> Workload:
    """BertModel at BertConfig defaults (or `config` overrides: tests use tiny ones), without
    its pooler, fed random token ids and a full attention mask."""
    from transformers import BertConfig, BertModel

    cfg = config_with(BertConfig, attention, **config)
    model = BertModel(cfg, add_pooling_layer=False).to(device=device, dtype=getattr(torch, dtype))
    ids, mask = build_inputs(shape, cfg, device)
    return Workload(model, {"input_ids": ids, "attention_mask": mask}, flops=flops(shape, cfg))


def flops(shape, cfg) -> float:
    """The matmuls of one forward: per layer the four attention projections (4 h^2) and the
    MLP (2 h i) per token, and the scores and their product with V (4 S^2 h) per sequence."""
    tokens = shape.batch * shape.seq
    h, i = cfg.hidden_size, cfg.intermediate_size
    per_layer = 2 * tokens * (4 * h * h + 2 * h * i) + 4 * shape.batch * shape.seq**2 * h
    return float(cfg.num_hidden_layers * per_layer)
