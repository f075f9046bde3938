"""Model workloads: what a factory builds for a cell, and how it is fed and checked.

A workload factory `factory(shape, dtype, device)` (a built-in in variants.MODELS, or a user's
`path/to/file.py:factory` whose first parameter is named `shape`) gets the cell's Tokens
(batch x sequence length), the dtype name and the device, and returns a Workload, or a pair
(callable, inputs): the callable is an nn.Module or a function, the inputs a tuple of
positional arguments or a dict of keyword arguments. Its weights are random: every process of
a cell builds it under the same seed, so all of them hold the same model.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable

import torch

from compilekit.model.errors import UserError


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


def build(factory: Callable, spec: str, shape, dtype: str, device: str, seed: int) -> Workload:
    """Call the factory under the cell's seed and check what it returned: a Workload whose fn
    takes positional tensors and returns one tensor (UserError, one line, otherwise)."""
    torch.manual_seed(seed)
    try:
        made = factory(shape, dtype, device)
    except (ValueError, TypeError, NotImplementedError) as exc:  # a shape it cannot take
        raise UserError(f"workload {spec!r} cannot build {shape} {dtype} on {device}: {exc}")
    if isinstance(made, tuple) and len(made) == 2 and callable(made[0]):
        made = Workload(*made)
    if not isinstance(made, Workload) or not callable(made.fn):
        raise UserError(
            f"workload factory {spec!r} returned {type(made).__name__}: return "
            "compilekit.Workload(fn, inputs) or a pair (callable, inputs)"
        )
    if not isinstance(made.inputs, (tuple, dict)):
        raise UserError(
            f"workload factory {spec!r} gave inputs as {type(made.inputs).__name__}: give a "
            "tuple of positional arguments or a dict of keyword arguments"
        )
    if isinstance(made.fn, torch.nn.Module):
        made.fn.eval().requires_grad_(False)  # an inference forward: no autograd graph
    return _positional(made)


def _positional(made: Workload) -> Workload:
    """fn(*tensors) -> tensor, whatever the factory's calling convention and output type."""
    made.model = made.fn
    if isinstance(made.inputs, dict):
        made.input_names = list(made.inputs)
        made.inputs = tuple(made.inputs.values())
    made.inputs = tuple(made.inputs)

    def forward(*args):
        return made.call_model(made.model, args)

    forward.__name__ = getattr(made.model, "__name__", type(made.model).__name__)
    made.fn = forward
    return made


def first_tensor(out):
    """The tensor a model's output is judged by: the output itself, its last_hidden_state
    (transformers' ModelOutput), or the first of a tuple, list or dict."""
    if isinstance(out, torch.Tensor):
        return out
    if getattr(out, "last_hidden_state", None) is not None:
        return out.last_hidden_state
    if isinstance(out, dict):
        out = list(out.values())
    if isinstance(out, (tuple, list)) and out:
        return first_tensor(out[0])
    return out  # not a tensor: the output check says what it is


def reference_output(made: Workload, args: tuple) -> tuple[torch.Tensor, str]:
    """The float64 truth: the workload's own reference, else the same model with its weights
    and floating inputs in float64."""
    if made.truth is not None:
        return made.truth(), "the workload's float64 reference"
    args64 = tuple(a.to(torch.float64) if a.is_floating_point() else a for a in args)
    if made.reference is not None:
        return first_tensor(made.reference(*args64)), "the workload's float64 reference"
    if isinstance(made.model, torch.nn.Module):
        from compilekit.measure import fits

        device = next((a.device for a in args if isinstance(a, torch.Tensor)), None)
        need = fits.float_copy_bytes(made.model, torch.float64)
        place, where = fits.reference_device(str(device or "cpu"), need)
        model64 = float_copy(made.model, torch.float64, place)
        for key, value in (made.reference_config or {}).items():
            setattr(model64.config, key, value)
        what = f" with {made.reference_config}" if made.reference_config else ""
        out = made.call_model(model64, tuple(a.to(place) for a in args64))
        if isinstance(out, torch.Tensor) and device is not None:
            out = out.to(device)  # beside the output it checks
        return out, f"the same model in float64{what}{where}"
    return made.call_model(made.model, args64), "the same function on float64 inputs"


def float_copy(model: torch.nn.Module, dtype: torch.dtype, device) -> torch.nn.Module:
    """A copy of model with its floating parameters and buffers in dtype on device, made one
    tensor at a time: the original stays as it is, and no second copy in its own dtype is made
    on the way (a deep copy, then .to(), peaks at both)."""
    memo: dict = {}
    for t in (*model.parameters(), *model.buffers()):
        if id(t) in memo:  # tied weights stay tied
            continue
        new = t.detach().to(device, dtype if t.is_floating_point() else t.dtype, copy=True)
        if isinstance(t, torch.nn.Parameter):
            new = torch.nn.Parameter(new, requires_grad=False)
        memo[id(t)] = new
    return copy.deepcopy(model, memo)
