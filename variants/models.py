"""What the transformers workloads share: a config with the attention implementation asked
for, and random token ids with a full attention mask (seeded by the cell:
compilekit/measure/workload.build)."""


def config_with(config_class, attention: str, **overrides):
    """config_class() with overrides, and transformers' attention implementation set."""
    cfg = config_class(**overrides)
    cfg._attn_implementation = attention
    return cfg


def build_inputs(shape, cfg, device: str):
    """(input_ids, attention_mask) for shape.batch x shape.seq tokens."""
    import torch

    if shape.seq > cfg.max_position_embeddings:
        raise ValueError(
            f"{shape.seq} tokens exceed the model's {cfg.max_position_embeddings} positions"
        )
    ids = torch.randint(0, cfg.vocab_size, (shape.batch, shape.seq), device=device)
    mask = torch.ones(shape.batch, shape.seq, dtype=torch.long, device=device)
    return ids, mask
