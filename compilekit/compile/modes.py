"""The mode registry. Every compile setting the toolkit uses is set here, in one place."""

from __future__ import annotations

from collections.abc import Callable

# name -> (torch.compile kwargs or None for eager, one-line description)
MODES = {
    "eager": (None, "no compile: the variant as written"),
    "default": ({}, "torch.compile(): Dynamo + Inductor, fused Triton (GPU) or C++ (CPU) kernels"),
    "reduce-overhead": (
        {"mode": "reduce-overhead"},
        "Inductor + CUDA graphs (CUDA only; skipped on CPU, and the run says so)",
    ),
    "max-autotune": (
        {"mode": "max-autotune"},
        "Inductor + autotuned GEMM/template choices + CUDA graphs",
    ),
    "max-autotune-no-cudagraphs": (
        {"mode": "max-autotune-no-cudagraphs"},
        "Inductor + autotuned GEMM/template choices, no CUDA graphs",
    ),
    "cudagraphs": (
        {"backend": "cudagraphs"},
        "Dynamo + CUDA graph capture, no Inductor (CUDA only)",
    ),
}

# Modes that ask for CUDA graphs: on a CPU device torch drops them and says so only in a counter.
CUDAGRAPH_MODES = ("reduce-overhead", "max-autotune", "cudagraphs")


def check_mode(name: str) -> None:
    from compilekit.model.errors import UserError

    if name not in MODES:
        raise UserError(f"unknown mode {name!r}: choose one of {', '.join(MODES)}")


def unsupported_reason(name: str, device: str, alloc: str = "") -> str | None:
    """Why this mode (with these CUDA allocator settings) cannot run on this device, asking
    torch; None if it can."""
    import torch

    if alloc and device != "cuda":
        return (
            f"allocator setting {alloc!r} is the CUDA caching allocator's; a {device} cell has "
            "none: drop it, or run the cell on cuda"
        )
    if name == "cudagraphs" and not (device == "cuda" and torch.cuda.is_available()):
        return (
            "mode 'cudagraphs' captures CUDA graphs and needs a CUDA device; "
            "use mode 'default' (or 'eager') on cpu"
        )
    return None


def build(name: str, fn: Callable, config: dict | None = None) -> Callable:
    """The variant wrapped by the mode (a fresh torch.compile wrapper for compiled modes), with
    the cell's Inductor options merged into the mode's (compilekit/compile/knobs.py)."""
    import torch

    from compilekit.compile.knobs import compile_options

    kwargs, _ = MODES[name]
    if kwargs is None:
        return fn
    return torch.compile(fn, **compile_options(kwargs, config or {}))


def uses_cudagraphs(name: str) -> bool:
    return name in CUDAGRAPH_MODES


def grad_context(grad: str):
    """What a cell's calls run inside, as a user's loop would (spec.GRAD_MODES): nothing
    ("off": the model is frozen, requires_grad off, as workloads build it), torch.no_grad(), or
    torch.inference_mode(). Entered once around a whole phase, as a user enters it once around
    a loop: Dynamo then compiles, guards and replays CUDA graphs under it."""
    import contextlib

    if grad == "off":  # a phase of a cell without a grad mode imports nothing for it
        return contextlib.nullcontext()
    import torch

    return {"no-grad": torch.no_grad, "inference": torch.inference_mode}[grad]()
