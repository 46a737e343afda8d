"""A bounded cache of the plain collectives' check verdicts, keyed by the metadata the checks read.

gpucomm.comm's plain functions check every call (types, devices, shapes, dtypes, layouts, autograd,
overlap of outputs and inputs).  Training loops call them again and again on the same buffers, so a
repeated call with identical metadata gets the verdict of the first call instead of the checks.

The key holds, for every input and output tensor: its ``id``, data pointer, storage offset, shape,
strides, dtype, device, layout and ``requires_grad``; plus the collective, its other arguments (op,
dim) and their types, the container types, the number of inputs and whether grad mode is on.  That is everything the
checks read (overlap is decided by addresses, shapes, strides and element sizes), so a tensor that
was resized, moved, re-pointed (``set_``), switched to ``requires_grad`` or replaced is re-checked.
Only exact ``torch.Tensor`` objects in lists or tuples are keyed; anything else (subclasses, sparse
tensors, which have no strides, generators) is checked in full every time.  Failed checks are never
cached: bad input raises the same error on every call.  The cache keeps no reference to a tensor (a
verdict holds the op, dim, shapes and devices only), so it never keeps memory alive.
"""

from __future__ import annotations

import operator
from typing import Any

import torch

__all__ = ["MAX_ENTRIES", "clear", "remember", "signature", "verdict"]

MAX_ENTRIES = 256
"""Most verdicts kept; the oldest is dropped first (a loop uses a handful of buffer sets)."""

_CACHE: dict[tuple, tuple] = {}
_TENSOR = torch.Tensor
_TENSOR_ONLY = {torch.Tensor}
_IS = operator.is_
_DATA_PTR = torch.Tensor.data_ptr
_OFFSET = torch.Tensor.storage_offset
_STRIDE = torch.Tensor.stride
_SHAPE = operator.attrgetter("shape")
_DTYPE = operator.attrgetter("dtype")
_DEVICE = operator.attrgetter("device")
_LAYOUT = operator.attrgetter("layout")
_REQUIRES_GRAD = operator.attrgetter("requires_grad")
_GRAD_ENABLED = torch.is_grad_enabled


def signature(collective: str, options: tuple, tensors: Any, out: Any) -> tuple | None:
    """The cache key of one call, or None when it cannot be keyed (then the caller checks in full)."""
    tt, to = type(tensors), type(out)
    if not ((tt is list or tt is tuple) and (out is None or to is list or to is tuple)):
        return None
    # out=tensors (in place): the same tensors, keyed once, and said so by ``inplace``
    inplace = out is not None and len(out) == len(tensors) and all(map(_IS, out, tensors))
    every = [*tensors, *out] if out is not None and not inplace else tensors
    try:
        if set(map(type, every)) != _TENSOR_ONLY:
            return None
        # the options' types too: dim=True or dim=1.0 equal dim=1 as keys, but the checks refuse them
        key = (collective, options, *map(type, options), tt, to, inplace, len(tensors), _GRAD_ENABLED(),
               *map(id, every),
               *map(_DATA_PTR, every), *map(_OFFSET, every), *map(_SHAPE, every), *map(_STRIDE, every),
               *map(_DTYPE, every), *map(_DEVICE, every), *map(_LAYOUT, every), *map(_REQUIRES_GRAD, every))
        hash(key)  # an unhashable op or dim: not keyed (the checks refuse it by name)
    except (RuntimeError, TypeError, NotImplementedError):  # sparse / nested tensors have no strides
        return None
    return key


def verdict(key: tuple | None) -> tuple | None:
    """The remembered verdict of ``key`` (None: not seen, or not keyable)."""
    return None if key is None else _CACHE.get(key)


def remember(key: tuple | None, value: tuple) -> None:
    """Keep ``value`` (which must hold no tensor) as the verdict of ``key``, dropping the oldest when full."""
    if key is None:
        return
    if len(_CACHE) >= MAX_ENTRIES:
        try:
            del _CACHE[next(iter(_CACHE))]
        except (KeyError, StopIteration, RuntimeError):  # another thread got there first
            pass
    _CACHE[key] = value


def clear() -> None:
    """Forget every verdict."""
    _CACHE.clear()
