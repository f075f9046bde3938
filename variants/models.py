"""What the transformers workloads share: a config with the attention implementation asked
for, and random token ids with a full attention mask (seeded by the cell:
compilekit/measure/workload.build)."""


def config_with(config_class, attention: str, **overrides):
    """config_class() with overrides, and transformers' attention implementation set."""
    cfg = config_class(**overrides)
    cfg._attn_implementation = attention
    return cfg


def own_reference(attention: str) -> dict | None:
    """Workload.reference_config: a plugged-in compilekit attention is checked against the
    model's own SDPA in float64 (the kernel under test may not even run float64)."""
    return {"_attn_implementation": "sdpa"} if attention.startswith("compilekit:") else None


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


LLAMA2_7B = dict(
    hidden_size=4096,
    intermediate_size=11008,
    num_attention_heads=32,
    num_key_value_heads=32,
    max_position_embeddings=4096,
    rms_norm_eps=1e-5,
)
LLAMA3_8B = dict(
    hidden_size=4096,
    intermediate_size=14336,
    num_attention_heads=32,
    num_key_value_heads=8,
    max_position_embeddings=8192,
    rms_norm_eps=1e-5,
    rope_theta=500000.0,
)


def decoder_block(overrides: dict, attention: str):
    """A LlamaDecoderLayer with the rotary embedding and causal mask LlamaModel gives it."""
    import inspect

    import torch
    from transformers import LlamaConfig
    from transformers.masking_utils import create_causal_mask
    from transformers.models.llama.modeling_llama import LlamaDecoderLayer, LlamaRotaryEmbedding

    cfg = config_with(LlamaConfig, attention, num_hidden_layers=1, **overrides)
    mask_params = inspect.signature(create_causal_mask).parameters
    no_cache = {"cache": None} if "cache" in mask_params else {"past_key_values": None}
    # transformers 4.x spells it input_embeds
    embeds = "inputs_embeds" if "inputs_embeds" in mask_params else "input_embeds"

    class LlamaBlock(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.config = cfg
            self.rotary_emb = LlamaRotaryEmbedding(cfg)
            self.layer = LlamaDecoderLayer(cfg, layer_idx=0)

        def forward(self, hidden_states):
            seq = hidden_states.shape[1]
            position_ids = torch.arange(seq, device=hidden_states.device).unsqueeze(0)
            extra = {"cache_position": position_ids[0]} if "cache_position" in mask_params else {}
            mask = create_causal_mask(
                config=cfg,
                attention_mask=None,
                position_ids=position_ids,
                **no_cache,
                **extra,
                **{embeds: hidden_states},
            )
            return self.layer(
                hidden_states,
                attention_mask=mask,
                position_ids=position_ids,
                position_embeddings=self.rotary_emb(hidden_states, position_ids),
            )

    return LlamaBlock()


def plugged_name(variant: str) -> str:
    """The name a compilekit attention variant is registered under with transformers:
    `compilekit:<variant>`, with "flash" spelled "fa" (a model asked for any implementation
    whose name holds "flash" looks for the flash-attn package or a hub kernel instead)."""
    return "compilekit:" + variant.replace("flash", "fa")


def plug_in(name: str, attention, cached=None) -> None:
    """Register a compilekit attention variant (causal, [B, H, S, D], scale 1/sqrt(D)) with
    transformers' AttentionInterface under `name`: a model whose config names it runs its
    attention through the variant, with the model's own projections, rotary and layout. K/V
    heads shared by several query heads (GQA) are repeated for it.

    Over a static KV cache (keys longer than queries: a decode step, or a prompt written into
    a cache) the variant's `cached(q, k, v, kv_lens)` runs instead, with each row's key count
    taken from the model's position ids (the last query's position + 1, on the device: a CUDA
    graph replays it): rows hold no padding, as compilekit's decode prompts do. A variant
    without one is refused there, never run over the cache's empty slots."""
    from transformers import AttentionInterface

    def forward(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kw):
        if key.shape[2] != query.shape[2]:
            return _over_cache(name, cached, query, key, value, kw.get("position_ids")), None
        groups = query.shape[1] // key.shape[1]
        if groups > 1:
            key = key.repeat_interleave(groups, dim=1)
            value = value.repeat_interleave(groups, dim=1)
        return attention(query, key, value).transpose(1, 2).contiguous(), None

    forward.takes_kv_cache = cached is not None  # what a decode session asks (measure/decode)
    AttentionInterface.register(name, forward)


def _over_cache(name: str, cached, query, key, value, position_ids):
    """The plugged-in attention over a static cache ([B, S, H, D] out, as transformers wants)."""
    import torch

    from compilekit.model.errors import Unsupported

    if cached is None:
        raise Unsupported(
            f"{name} takes queries and keys of one length, not a KV cache: decode with "
            "@triton-flash, or one of the model's own attentions"
        )
    if position_ids is None:
        raise Unsupported(f"{name} over a KV cache needs the model's position ids")
    kv_lens = (position_ids[:, -1] + 1).to(torch.int32)
    if kv_lens.shape[0] != query.shape[0]:  # one row of positions for the whole batch
        kv_lens = kv_lens.expand(query.shape[0]).contiguous()
    return cached(query, key, value, kv_lens).transpose(1, 2).contiguous()


def causal_lm(dimensions: dict, attention: str, shape, dtype: str, device: str):
    """Workload(LlamaForCausalLM at these dimensions with random weights, built on the device
    in the dtype (a 7B model never passes through the host), {"input_ids": [batch, shape.seq]})."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from compilekit.model.workload import Workload

    cfg = config_with(LlamaConfig, attention, **dimensions)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(getattr(torch, dtype))
    try:
        with torch.device(device):
            model = LlamaForCausalLM(cfg)
    finally:
        torch.set_default_dtype(previous)
    ids, _ = build_inputs(shape, cfg, device)
    return Workload(model, {"input_ids": ids}, reference_config=own_reference(attention))
