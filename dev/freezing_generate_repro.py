"""freezing=True and transformers' compiled generate() with a static cache, without compilekit:
the first compiled generate() gives eager's tokens, the second stops in Inductor's kernel with
"index out of bounds: 0 <= tmp9 < 20L" (the cache write's position, read from a 0-dim int64
input that the compiled graph also increments in place). Without freezing all three calls
match eager. Runs on a CPU in about a minute: python dev/freezing_generate_repro.py [0|1]"""

import sys

import torch
from transformers import CompileConfig, LlamaConfig, LlamaForCausalLM


def main(freezing: bool) -> None:
    torch.manual_seed(0)
    config = LlamaConfig(
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=1,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=100,
        max_position_embeddings=64,
    )
    model = LlamaForCausalLM(config).eval()
    torch._inductor.config.freezing = freezing
    prompt = torch.randint(0, 100, (1, 8))
    kwargs = dict(
        attention_mask=torch.ones_like(prompt),
        max_new_tokens=12,
        eos_token_id=None,
        do_sample=False,
        cache_implementation="static",
        max_cache_len=20,
    )
    compiled = CompileConfig(fullgraph=True, dynamic=False, mode=None)
    compiled._compile_all_devices = True  # transformers skips the compile on a CPU otherwise
    with torch.no_grad():
        eager = model.generate(prompt, disable_compile=True, **kwargs)
        for call in range(3):
            tokens = model.generate(prompt, compile_config=compiled, **kwargs)
            same = bool((tokens == eager).all())
            print(f"compiled generate() call {call}: eager's tokens: {same}")


if __name__ == "__main__":
    main(sys.argv[1:] != ["0"])
