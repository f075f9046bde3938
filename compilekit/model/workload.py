"""What a model factory returns: a Workload, the model and its inputs (compilekit.Workload).

A workload factory `factory(shape, dtype, device)` (a built-in in variants.MODELS, or a user's
`path/to/file.py:factory` whose first parameter is named `shape`) gets the cell's Tokens
(batch x sequence length), the dtype name and the device, and returns a Workload, or a pair
(callable, inputs): the callable is an nn.Module or a function, the inputs a tuple of
positional arguments or a dict of keyword arguments. Its weights are random: every process of
a cell builds it under the same seed, so all of them hold the same model. measure/workload.py
builds and checks it. Imports no torch: the variants import it as their API.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable


@dataclasses.dataclass
class Workload:
    """A model and its inputs, as a factory returns them. reference: a float64 truth of its
    own (called with the float64 inputs), else the same module converted to float64.
    tolerance: max relative error allowed, else the dtype's bound. flops: per forward."""

    fn: Callable
    inputs: tuple | dict
    reference: Callable | None = None
    tolerance: float | None = None
    flops: float | None = None
    # attributes set on the float64 copy's config (transformers): a model with a plugged-in
    # attention is checked against its own SDPA, not against the kernel under test
    reference_config: dict | None = None
    # a float64 truth from what the factory kept (no input converted: a padded batch in float64
    # could be larger than the device), and the output taken to the layout it gives
    truth: Callable | None = None
    unpack: Callable | None = None
    # a ragged batch's setup time and padding waste (variants/varlen.py)
    varlen: dict | None = None
    # one line the cell's summary shows: where a checkpoint's weights came from (variants/hf.py)
    note: str | None = None
    # set by build(): what the factory gave, and the names of its keyword inputs
    model: Callable | None = dataclasses.field(default=None, init=False)
    input_names: list | None = dataclasses.field(default=None, init=False)

    def call_model(self, model, args: tuple):
        """model called as the factory's inputs were given, on these positional tensors."""
        names = self.input_names
        return first_tensor(model(**dict(zip(names, args))) if names else model(*args))


def first_tensor(out):
    """The tensor a model's output is judged by: the output itself, its last_hidden_state
    (transformers' ModelOutput), or the first of a tuple, list or dict."""
    import torch

    if isinstance(out, torch.Tensor):
        return out
    if getattr(out, "last_hidden_state", None) is not None:
        return out.last_hidden_state
    if isinstance(out, dict):
        out = list(out.values())
    if isinstance(out, (tuple, list)) and out:
        return first_tensor(out[0])
    return out  # not a tensor: the output check says what it is
