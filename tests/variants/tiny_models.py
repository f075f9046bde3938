"""Tiny configs of the built-in models (the same transformers classes), and factories a user
could write, good and bad, for the model tests on CPU."""

import torch

from compilekit.variants import bert_base

TINY_BERT = dict(
    hidden_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    intermediate_size=128,
    vocab_size=1000,
    max_position_embeddings=64,
)


def bert(shape, dtype, device):
    return bert_base.workload(shape, dtype, device, **TINY_BERT)


def bert_one_layer(shape, dtype, device):
    """The compiled cell's test: one layer keeps its cold compile short."""
    return bert_base.workload(shape, dtype, device, **{**TINY_BERT, "num_hidden_layers": 1})


def returns_a_list(shape, dtype, device):
    return [torch.nn.Linear(4, 4), torch.ones(shape.batch, 4)]


class Doubler(torch.nn.Module):
    def forward(self, x):
        return {"out": x * 2}


def pair(shape, dtype, device):
    """A user's module and its inputs as a pair; its dict output is judged by its first value."""
    x = torch.randn(shape.batch, shape.seq, dtype=getattr(torch, dtype), device=device)
    return Doubler(), (x,)


TINY = {
    "bert-base": TINY_BERT,
    "gpt2": dict(n_embd=64, n_layer=2, n_head=4, n_positions=64, vocab_size=1000),
    "llama-block": dict(
        hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=4
    ),
    "llama3-block": dict(
        hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=2
    ),
}


TINY_LLAMA_LM = dict(
    hidden_size=64,
    intermediate_size=128,
    num_attention_heads=4,
    num_key_value_heads=2,
    num_hidden_layers=1,  # one layer: the decode cell's three compiles stay short
    vocab_size=256,
    max_position_embeddings=128,
)


def llama_lm(shape, dtype, device):
    """llama2-7b's classes at a tiny size (GQA 4/2): a causal LM that decodes."""
    from compilekit.variants import llama2_7b

    return llama2_7b.workload(shape, dtype, device, **TINY_LLAMA_LM)


def llama_lm_flex(shape, dtype, device):
    """llama_lm with transformers' flex_attention: its mask function is where depyf's decompiler
    once broke the capture compile."""
    from compilekit.variants import llama2_7b

    return llama2_7b.workload(shape, dtype, device, attention="flex_attention", **TINY_LLAMA_LM)


def llama_lm_triton_flash(shape, dtype, device):
    """llama_lm with triton-flash plugged in (over the static cache too), as
    `llama2-7b@triton-flash` plugs it into the full-size model."""
    from compilekit.variants import llama2_7b, models, triton_flash

    name = models.plugged_name("triton-flash")
    models.plug_in(name, triton_flash.attention, triton_flash.cached_attention)
    return llama2_7b.workload(shape, dtype, device, attention=name, **TINY_LLAMA_LM)


def tiny_transformers() -> dict:
    """{name: (model class, config)}: tiny configs (two layers, a vocabulary of 100, 64
    positions) of transformers' own classes, an encoder, decoders with and without GQA, T5's
    encoder and T5 whole; what the profile and hf: tests run."""
    import transformers as tf

    common = dict(vocab_size=100)
    decoder = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                   num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=64)  # fmt: skip
    t5 = tf.T5Config(d_model=32, d_ff=64, d_kv=16, num_layers=2, num_heads=2, **common)
    return {
        "bert": (tf.BertModel, tf.BertConfig(hidden_size=32, num_hidden_layers=2,
                 num_attention_heads=2, intermediate_size=64, max_position_embeddings=64,
                 **common)),
        "gpt2": (tf.GPT2Model, tf.GPT2Config(n_embd=32, n_layer=2, n_head=2, n_positions=64,
                 **common)),
        "llama": (tf.LlamaForCausalLM, tf.LlamaConfig(**decoder, **common)),
        "qwen2": (tf.Qwen2Model, tf.Qwen2Config(**decoder, **common)),
        "t5-encoder": (tf.T5EncoderModel, t5),
        "t5": (tf.T5ForConditionalGeneration, t5),  # an encoder-decoder: fed decoder ids too
    }  # fmt: skip
