"""Model workloads built for a cell: a factory called under the cell's seed, what it returned
checked (a Workload, model/workload.py, or a pair), fed positional tensors, and its float64
truth made."""

from __future__ import annotations

import copy
from collections.abc import Callable

import torch

from compilekit.model.errors import UserError
from compilekit.model.workload import Workload, first_tensor


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
