"""A causal LM, its prompt and a static KV cache, and the two functions the loop compiles:
`prefill(prompt, position)` and `step(token, position)`. Each sets the cache's write position,
runs the model and returns the greedy next token [B, 1] and the last position's logits [B, V].

Both take the position as a device tensor, so one compiled step serves every token (no
recompile, no host sync), and calling a step twice at the same position writes the same cache
slot twice: a step can be timed, profiled and checked as any cell's callable.
"""

from __future__ import annotations

import inspect

import torch

from compilekit.model.errors import Unsupported, UserError


class Session:
    """What the decode paths share: the model (eval, no grad), the prompt [B, P] and the
    loop's static cache of shape.cache_len positions, filled by one eager prefill."""

    def __init__(self, made, shape, spec: str):
        model = made.model
        names = made.input_names or []
        prompt = made.inputs[names.index("input_ids") if "input_ids" in names else 0]
        if not callable(getattr(model, "generate", None)) or not _is_causal_lm(model):
            raise UserError(
                f"{spec!r} is not a causal LM (a transformers model with generate() and "
                "logits): a decode shape BxP+N needs one, e.g. llama2-7b; give this model "
                "a BxS shape"
            )
        if prompt.dtype != torch.long or prompt.dim() != 2:
            raise UserError(
                f"{spec!r}: a decode prompt is token ids [batch, prompt]; its factory gave "
                f"{prompt.dtype} {list(prompt.shape)}"
            )
        implementation = getattr(model.config, "_attn_implementation", "") or ""
        if implementation.startswith("compilekit:") and not _takes_kv_cache(implementation):
            raise UserError(
                f"{spec!r}: {implementation} takes queries and keys of one length, and a static "
                "cache's unfilled positions are masked only by the model's mask: decode with "
                "@triton-flash (it reads each row's filled keys only) or the model's own "
                "attention (sdpa, eager or flex_attention)"
            )
        limit = getattr(model.config, "max_position_embeddings", None)
        if limit and shape.prompt + shape.new > limit:
            raise UserError(
                f"{spec!r}: {shape.prompt} prompt + {shape.new} new tokens exceed the model's "
                f"{limit} positions: generate fewer tokens"
            )
        window = _shortest_window(model.config)
        if window is not None and shape.cache_len > window:  # this model at this shape
            raise Unsupported(
                f"{spec!r}: its attention window ({window} positions) is shorter than this "
                f"decode's {shape.cache_len} (prompt + new tokens); compilekit's loop keeps the "
                "cache position on the device, and a cache sliding past its window needs it on "
                f"the host: decode at most {window} positions"
            )
        self.model, self.prompt, self.shape = model, prompt, shape
        self.device = prompt.device
        self.cache_kw, self.takes_cache_position = _cache_argument(model)
        self.cache = self.new_cache()
        self.zero = torch.zeros((), dtype=torch.long, device=self.device)
        # one position per new token after the first (which the prefill gives)
        self.positions = torch.arange(
            shape.prompt, shape.prompt + shape.new, dtype=torch.long, device=self.device
        )
        # the cache's tensors exist before anything compiles; the first token and the
        # position after the prompt are what a step is called with
        first, _ = self.prefill(prompt, self.zero)
        self.step_args = (first, self.positions[0])

    def retyped(
        self, dtype: torch.dtype, positions: int | None = None, device=None, config=None
    ) -> Session:
        """This session with the model's weights in dtype (in place: a 7B model has no room for
        a second copy) and a fresh cache filled by the same prompt: a float reference.
        positions: the cache's capacity (default the shape's), as many as the reference's
        steps write: a float32 cache of batch 32 x 2k positions at 7B is 68 GB, beside the
        bf16 caches still held; the unwritten positions are masked out either way.
        device: where the model goes (default where it is): the host, where the GPU has no
        room for the float weights (compilekit/measure/fits.py). config: attributes set on the
        model's config first (Workload.reference_config: the model's own attention in place of
        a plugged-in compilekit one)."""
        for key, value in (config or {}).items():
            setattr(self.model.config, key, value)
        device = torch.device(device) if device is not None else self.device
        self.model.to(device=device, dtype=dtype)
        if device != self.device:  # everything a step reads goes with it
            self.prompt, self.zero, self.positions = (
                t.to(device) for t in (self.prompt, self.zero, self.positions)
            )
            self.device = device
        self.cache = self.new_cache(positions)  # the old one's memory goes at its first write
        self.prefill(self.prompt, self.zero)
        return self

    def new_cache(self, positions: int | None = None):
        """A static cache of `positions` (default the shape's capacity); its tensors appear on
        the first write. A sliding-window (or chunked) layer's cache becomes a plain static
        one: it chooses its writes and its mask's size by a count of the tokens it took, kept
        on the host, which the loop's device-side position never sets (a step called twice at
        one position would count two tokens). Within the window, which the run never passes
        (Session refuses that), the window changes nothing."""
        from transformers import StaticCache

        capacity = positions or self.shape.cache_len
        cache = StaticCache(config=self.model.config, max_cache_len=capacity)
        for index, layer in enumerate(getattr(cache, "layers", [])):
            if getattr(layer, "is_sliding", False):  # its count of tokens kept on the host
                from transformers.cache_utils import StaticLayer

                cache.layers[index] = StaticLayer(max_cache_len=capacity)
        return cache

    def forward_greedy(self, ids: torch.Tensor, position: torch.Tensor):
        """Write ids' keys and values at `position` onwards, return (next ids, last logits)."""
        kwargs = {self.cache_kw: self.cache, "use_cache": True, "logits_to_keep": 1}
        if self.takes_cache_position:  # transformers before the cache kept its own length
            kwargs["cache_position"] = position + torch.arange(ids.shape[1], device=ids.device)
        else:
            for layer in self.cache.layers:
                if getattr(layer, "is_initialized", False):
                    layer.cumulative_length.copy_(position)
        logits = self.model(input_ids=ids, **kwargs).logits[:, -1]
        return logits.argmax(-1, keepdim=True), logits

    # Two functions, two code objects: Dynamo keeps a compile of each, so the prompt's length
    # never turns the one-token step dynamic.
    def prefill(self, ids: torch.Tensor, position: torch.Tensor):
        """The prompt's forward: (first new token, its logits)."""
        return self.forward_greedy(ids, position)

    def step(self, ids: torch.Tensor, position: torch.Tensor):
        """One token's forward: (next token, its logits)."""
        return self.forward_greedy(ids, position)


def _shortest_window(config) -> int | None:
    """The shortest sliding window (or attention chunk) among the model's layers, None where
    every layer attends to all the positions before it."""
    from transformers import cache_utils

    text = config.get_text_config(decoder=True)
    per_layer_of = getattr(cache_utils, "get_layer_types_and_kwargs", None)
    if per_layer_of is None:  # transformers 4: the config's own fields say it
        types = getattr(text, "layer_types", None) or ["sliding_attention"]
        window = getattr(text, "sliding_window", None) or getattr(
            text, "attention_chunk_size", None
        )
        windowed = any(t in ("sliding_attention", "chunked_attention") for t in types)
        return window if window and windowed else None
    _, per_layer = per_layer_of(text)
    windows = [kw["sliding_window"] for kw in per_layer if kw.get("sliding_window")]
    return min(windows, default=None)


def _takes_kv_cache(implementation: str) -> bool:
    """Whether the attention registered under this name reads a static cache's filled keys
    (variants/models.py's plug_in marks those that do)."""
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    interface = ALL_ATTENTION_FUNCTIONS
    if hasattr(interface, "get_interface"):
        forward = interface.get_interface(implementation, None)
    else:  # transformers 4: a mapping
        forward = interface.get(implementation)
    return bool(getattr(forward, "takes_kv_cache", False))


def _is_causal_lm(model) -> bool:
    can = getattr(model, "can_generate", None)
    return bool(can()) if callable(can) else False


def _cache_argument(model) -> tuple[str, bool]:
    """(the forward's keyword for the cache, whether it takes cache_position): transformers 5
    names it `cache` and keeps the write position in the cache, 4.x `past_key_values` with
    `cache_position`."""
    params = inspect.signature(model.forward).parameters
    name = "cache" if "cache" in params else "past_key_values"
    return name, "cache_position" in params
