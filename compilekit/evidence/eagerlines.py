"""Which line of the user's code launched each op: the call stack of every op as it runs,
recorded by a torch function mode and a dispatch mode (the profiler's own stacks name only the
function, and crash now and then on torch 2.13). Eager code only: under these modes Dynamo runs
an already compiled model uncompiled (Recorded.ran_compiled tells).

Ops are recorded twice: as ATen dispatches (`aten::bmm`, `aten::_softmax`: the ops that launch
GPU kernels) and as torch functions (`aten::matmul`, `aten::softmax`: the ops the CPU profile
shows), so either kind of launcher finds its line. Keys are (op, n): the n-th call of the op.
A kernel launched outside any op (a raw Triton launch) takes its definition's line instead
(raw_kernel_definitions).
"""

from __future__ import annotations

import contextlib
import os
import sys
import traceback

from compilekit.evidence.frames import is_user_file


class Recorded(dict):
    """{(op, n): user frames, innermost first}; ran_compiled: whether an op ran below a
    torch.compile'd function's frame, which Dynamo runs uncompiled under the recorder's modes
    ("non-infra torch dispatch mode present"), so the block's figures are eager code's."""

    ran_compiled = False


EVAL_FRAME = os.path.join("torch", "_dynamo", "eval_frame.py")


def _compiled_wrapper(frame, optimize_context: type) -> bool:
    """Whether frame is a torch.compile'd function's wrapper (an OptimizeContext's, in Dynamo's
    eval_frame.py); torch.compiler.disable's wrapper (a DisableContext, also there when Dynamo
    skips a frame) is not one."""
    return frame.f_code.co_filename.endswith(EVAL_FRAME) and isinstance(
        frame.f_locals.get("self"), optimize_context
    )


@contextlib.contextmanager
def recording(dispatches: bool = True):
    """Yield a Recorded, filled while the block runs."""
    from torch._dynamo.eval_frame import OptimizeContext
    from torch.overrides import TorchFunctionMode
    from torch.utils._python_dispatch import TorchDispatchMode

    lines = Recorded()
    counts: dict[str, int] = {}

    def record(name: str) -> None:
        stack = list(traceback.walk_stack(sys._getframe()))  # innermost first, walked once
        if not lines.ran_compiled:
            lines.ran_compiled = any(_compiled_wrapper(f, OptimizeContext) for f, _ in stack)
        frames = [
            {"file": f.filename, "line": f.lineno, "code": (f.line or "").strip()}
            for f in traceback.StackSummary.extract(stack)
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


def raw_kernel_definitions() -> dict[str, list[dict]]:
    """{kernel name: [the frame of its definition]} for each @triton.jit (or Gluon) kernel,
    autotuned or not, defined in a project or user file this process imported.

    A kernel launched raw (`kernel[grid](...)`, or a cached launcher: gluon-flash and
    triton-flash launch that way eagerly, to save host time) goes through no torch op, so no
    op's call stack names its line (its launcher is NO_OP). The profiler names it after its
    function, and the function's definition is where it came from."""
    import linecache
    import sys

    jit = sys.modules.get("triton.runtime.jit")
    if jit is None:  # Triton never imported: no kernel of it ran
        return {}
    found: dict[str, list[dict]] = {}
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None) or ""
        if not path.endswith(".py") or "-packages" in path or not is_user_file(path):
            continue
        for value in list(vars(module).values()):
            value = _jit_function(value, jit.JITFunction)
            if value is None:
                continue
            code = value.fn.__code__
            line = code.co_firstlineno  # the first decorator's line: find the def below it
            while line < code.co_firstlineno + 20:
                text = linecache.getline(code.co_filename, line).strip()
                if text.startswith("def "):
                    break
                line += 1
            else:
                line, text = code.co_firstlineno, ""
            frame = {"file": code.co_filename, "line": line, "code": text}
            found.setdefault(code.co_name, [frame])
    return found


def _jit_function(value, jit_function):
    """The JITFunction value is, or holds in .fn (an Autotuner or Heuristics), or None. Any
    error reading .fn means none: a library's placeholder object may raise anything there
    (transformers' stand-ins for missing backends raise ImportError)."""
    for _ in range(4):
        if isinstance(value, jit_function):
            return value
        try:
            value = value.fn
        except Exception:
            return None
    return value if isinstance(value, jit_function) else None
