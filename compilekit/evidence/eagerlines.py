"""Which line of the user's code launched each op: the call stack of every op as it runs,
recorded by a torch function mode and a dispatch mode (the profiler's own stacks name only the
function, and crash now and then on torch 2.13). Eager code only: under these modes Dynamo would
compile an already compiled model again, or run it uncompiled.

Ops are recorded twice: as ATen dispatches (`aten::bmm`, `aten::_softmax`: the ops that launch
GPU kernels) and as torch functions (`aten::matmul`, `aten::softmax`: the ops the CPU profile
shows), so either kind of launcher finds its line. Keys are (op, n): the n-th call of the op.
"""

from __future__ import annotations

import contextlib
import traceback

from compilekit.evidence.kernelmap import is_user_file


@contextlib.contextmanager
def recording(dispatches: bool = True):
    """Yield {(op, n): user frames, innermost first}, filled while the block runs."""
    from torch.overrides import TorchFunctionMode
    from torch.utils._python_dispatch import TorchDispatchMode

    lines: dict[tuple[str, int], list[dict]] = {}
    counts: dict[str, int] = {}

    def record(name: str) -> None:
        frames = [
            {"file": f.filename, "line": f.lineno, "code": (f.line or "").strip()}
            for f in reversed(traceback.extract_stack())
            if is_user_file(f.filename)
        ]
        index = counts.get(name, 0)
        counts[name] = index + 1
        lines.setdefault((name, index), frames)

    class Functions(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            name = getattr(func, "__name__", "").strip("_")
            if name and not name.startswith("get"):
                record(f"aten::{name}")
            return func(*args, **(kwargs or {}))

    class Dispatches(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            # Inside torch.inference_mode() a composite op (aten::linear) reaches the mode
            # whole, where autograd would have split it: split it here, under the mode, so
            # its parts (aten::addmm, the op the kernel's launch names) are recorded as
            # outside the mode
            if composite(func):
                with self:
                    out = func.decompose(*args, **(kwargs or {}))
                if out is not NotImplemented:
                    return out
            record(f"aten::{func.overloadpacket.__name__}")
            return func(*args, **(kwargs or {}))

    with contextlib.ExitStack() as stack:
        stack.enter_context(Functions())
        if dispatches:
            stack.enter_context(Dispatches())
        yield lines


def composite(func) -> bool:
    """Whether an ATen op is CompositeImplicitAutograd (made of other ops, no kernel)."""
    import torch

    return torch._C._dispatch_has_kernel_for_dispatch_key(
        func.name(), torch._C.DispatchKey.CompositeImplicitAutograd
    )


def eager_source_lines(fn, args) -> dict[tuple[str, int], list[dict]]:
    """recording() around one call of fn. A dispatch mode cannot see through some
    higher-order ops (flex_attention): then the function level alone, then nothing;
    attribution must never fail the cell."""
    for dispatches in (True, False):
        try:
            with recording(dispatches) as lines:
                fn(*args)
            return lines
        except Exception:  # noqa: BLE001 (a variant's own op the modes cannot pass through)
            continue
    return {}
