"""Decode: a causal LM generating token by token into a static KV cache, eager against
compiled, measured against the memory-bandwidth limit.

A decode cell (shape `BxP+N[@C]`, compilekit.model.spec.Decode) runs two paths side by side:
- `loop` (loop.py): compilekit's own minimal decode loop, one compiled step per token, greedy
  on the device, no host sync per token (in the spirit of gpt-fast);
- `generate` (generate.py): transformers' `generate()` with a static cache, compiled the way
  transformers documents for the mode.
session.py holds the model, its prompt and the loop's cache; figures.py the arithmetic (bytes
per token, GB/s, share of the copy ceiling, break-even); compilekit/launch/decodephase.py the
measure process's steps.
"""
