"""Shared argument checks and message helpers.

Every message follows one pattern: name the argument, say what was expected, echo what came, and
say how to fix it.  ``TypeError`` for types, ``ValueError`` for values; never ``assert`` on user
input (asserts vanish under ``python -O``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

__all__ = [
    "check_same_dtype",
    "check_tensor",
    "check_tensor_list",
    "describe",
    "fail_type",
    "fail_value",
]


def describe(x: Any) -> str:
    """A short echo of a value for an error message: tensors by shape, dtype and device."""
    if isinstance(x, torch.Tensor):
        if x.is_nested:  # a nested tensor has no single shape: list(x.shape) would raise
            return f"nested tensor({x.size(0)} components, dtype={x.dtype}, device={x.device})"
        layout = "" if x.layout == torch.strided else f", layout={x.layout}"
        return f"tensor(shape={list(x.shape)}, dtype={x.dtype}, device={x.device}{layout})"
    text = repr(x)
    return text if len(text) <= 80 else text[:77] + "..."


def fail_type(arg: str, expected: str, got: Any, fix: str = "") -> TypeError:
    """Build (not raise) a TypeError: ``arg: expected X, but got <type> <value>; fix``."""
    msg = f"{arg}: expected {expected}, but got {type(got).__name__} {describe(got)}"
    return TypeError(f"{msg}; {fix}" if fix else msg)


def fail_value(arg: str, expected: str, got: str, fix: str = "") -> ValueError:
    """Build (not raise) a ValueError: ``arg: expected X, but got Y; fix``."""
    msg = f"{arg}: expected {expected}, but got {got}"
    return ValueError(f"{msg}; {fix}" if fix else msg)


def check_tensor(x: Any, arg: str) -> torch.Tensor:
    """Raise TypeError unless ``x`` is a tensor."""
    if not isinstance(x, torch.Tensor):
        raise fail_type(arg, "a torch.Tensor", x)
    return x


def check_tensor_list(xs: Any, arg: str, *, allow_empty: bool = False) -> list[torch.Tensor]:
    """Raise unless ``xs`` is a non-empty sequence (list/tuple) of tensors; returns it as a list."""
    if isinstance(xs, torch.Tensor):
        raise fail_type(arg, "a sequence of tensors (one per participant)", xs,
                        "wrap a single tensor in a list: [t]")
    if not isinstance(xs, Sequence) or isinstance(xs, str | bytes):
        raise fail_type(arg, "a sequence of tensors (one per participant)", xs)
    items = list(xs)
    if not items and not allow_empty:
        raise fail_value(arg, "at least one tensor", "an empty sequence", "pass one tensor per participant")
    for i, t in enumerate(items):
        check_tensor(t, f"{arg}[{i}]")
    return items


def check_same_dtype(xs: Sequence[torch.Tensor], arg: str) -> torch.dtype:
    """Raise ValueError unless every tensor has the first one's dtype."""
    dtype = xs[0].dtype
    for i, t in enumerate(xs):
        if t.dtype != dtype:
            raise fail_value(f"{arg}[{i}]", f"dtype {dtype} (the dtype of {arg}[0])", f"dtype {t.dtype}",
                             "cast every tensor to one dtype first")
    return dtype
