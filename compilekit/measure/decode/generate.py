"""transformers' `generate()` as users run it: greedy, a static cache, and the mode's compile
through transformers' own CompileConfig (which compiles the one-token forward; the prompt's
forward runs eagerly). A logits processor marks the clock at each token, without a sync."""

from __future__ import annotations

import time

import torch

from compilekit.measure.decode.clock import Clock
from compilekit.measure.decode.loop import Run


def compile_config(options: dict | None, device: str):
    """The generation config's compile fields for a compilekit mode: None for eager (its
    automatic compile switched off), else transformers' CompileConfig with the mode's
    torch.compile arguments (on a CPU, flagged to compile there too, as transformers' tests
    do: it would silently run uncompiled otherwise)."""
    if options is None:
        return None
    from transformers import CompileConfig

    # CompileConfig's own mode is reduce-overhead: default mode, and options (which
    # torch.compile takes only without a mode), each say mode=None
    config = CompileConfig(**{"mode": None, **options})
    if torch.device(device).type != "cuda":
        config._compile_all_devices = True
    return config


class _Marks:
    """A logits processor that only marks the clock: called once per new token, after the
    forward that produced its logits."""

    def __init__(self, clock: Clock):
        self.clock = clock

    def __call__(self, input_ids, scores):
        self.clock.mark()
        return scores


def _cache_capacity(shape) -> dict:
    """generate()'s argument for a static cache of the cell's capacity: transformers 5 takes
    max_cache_len; 4.x sizes the cache by the tokens it generates (P + N - 1), so a cell's
    larger capacity (`BxP+N@C`) is a failed path there, with its reason."""
    from transformers import GenerationConfig

    if hasattr(GenerationConfig(), "max_cache_len"):
        return {"max_cache_len": shape.cache_len}
    if shape.cache_len != shape.prompt + shape.new:
        import transformers

        raise RuntimeError(
            f"transformers {transformers.__version__} sizes generate()'s static cache by the "
            f"tokens it generates; a cache of {shape.cache_len} positions needs transformers 5"
        )
    return {}


def run_generate(session, options: dict | None, new: int | None = None) -> Run:
    """`new` (default shape.new) greedy tokens from transformers' generate() with a static
    cache of the cell's capacity; options: the mode's torch.compile arguments (None: eager)."""
    from transformers import LogitsProcessorList

    shape = session.shape
    clock = Clock(session.device)
    config = compile_config(options, session.device)
    kwargs = {"disable_compile": True} if config is None else {"compile_config": config}
    start = time.perf_counter()
    clock.mark()
    out = session.model.generate(
        session.prompt,
        attention_mask=torch.ones_like(session.prompt),
        max_new_tokens=new or shape.new,
        # no end-of-text token: N tokens each run, and greedy over every logit, as the loop is
        # (min_new_tokens would mask that token's logit instead)
        eos_token_id=None,
        do_sample=False,
        cache_implementation="static",
        **_cache_capacity(shape),
        logits_processor=LogitsProcessorList([_Marks(clock)]),
        **kwargs,
    )
    times = clock.times_ms()
    wall_s = time.perf_counter() - start
    return Run(
        tokens=out[:, session.prompt.shape[1] :],
        ttft_ms=times[0],
        token_ms=[b - a for a, b in zip(times, times[1:])],
        host_ms=[],
        wall_s=wall_s,
    )
