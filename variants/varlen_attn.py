"""torch.nn.attention.varlen.varlen_attn: PyTorch's own variable-length attention over packed
q, k, v with cumulative sequence offsets (Flash Attention underneath), causal per document.
Unsupported, with the reason, where the installed torch has no such module or cannot run it."""

import inspect

import torch

from compilekit.model.errors import Unsupported
from compilekit.variants.varlen import offsets, repeated_kv
from compilekit.variants.varlen import workload as varlen_workload

try:
    from torch.nn.attention.varlen import varlen_attn
except ImportError as exc:  # older torch
    varlen_attn, MISSING = None, str(exc)

DESCRIPTION = "torch.nn.attention.varlen.varlen_attn over packed q, k, v, causal"

# its keyword arguments for this torch, fixed in the setup (the timed call only reads them)
_KWARGS: dict = {}


def prepare(q, k, v, lengths):
    if varlen_attn is None:
        raise Unsupported(
            f"torch {torch.__version__} has no torch.nn.attention.varlen ({MISSING})"
        )
    params = inspect.signature(varlen_attn).parameters
    if "window_size" in params:  # newer torch: a (left, right) window, (-1, 0) is causal
        _KWARGS["window_size"] = (-1, 0)
    elif "is_causal" in params:
        _KWARGS["is_causal"] = True
    else:
        raise Unsupported("this torch's varlen_attn takes no causal argument compilekit knows")
    if q.shape[1] != k.shape[1]:
        if "enable_gqa" in params:
            _KWARGS["enable_gqa"] = True
        else:  # repeated in the setup
            k, v = repeated_kv(q, k, v)
    return q, k, v, offsets(lengths, q.device), max(lengths)


def attention(q, k, v, cu_seqlens, longest):
    return varlen_attn(q, k, v, cu_seqlens, cu_seqlens, longest, longest, **_KWARGS)


def unpack(out, lengths):
    return out  # packed [T, H, D] already


def workload(shape, dtype: str, device: str):
    return varlen_workload(shape, dtype, device, attention, prepare, unpack)
