"""Splitting the global batch over the replicas: every tensor by dim 0, in order, into contiguous shards.

The rule (one for inputs and targets alike): the batch is a tensor, or tuples, lists and dicts of them
(nested freely), plus any non-tensor values.  Every tensor must have a dim 0 of the same size B (the
samples), and B must be at least the replica count n.  Shards are ``torch.tensor_split(t, n)``: contiguous
runs of samples in order, sizes differing by at most one — the first ``B mod n`` replicas get
``B // n + 1`` samples, the others ``B // n`` — so an uneven last batch still gives every replica
work.  Non-tensor values go to every replica unchanged (as ``nn.DataParallel`` does).

DataParallel splits with ``chunk``, which gives *fewer* shards than devices when B is small (4 samples
over 3 devices: 2, 2 and nothing); a replica without a shard would never produce its gradients, so
this module uses ``tensor_split``'s balanced sizes instead.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import torch

__all__ = ["BatchError", "batch_size", "map_tensors", "shard_sizes", "split", "split_call", "split_like", "tensors",
           "to_device"]


class BatchError(ValueError):
    """A batch that cannot be split over the replicas (the message names the argument and the fix)."""


def _walk(x: Any, path: str) -> Iterator[tuple[str, torch.Tensor]]:
    """Every tensor inside ``x`` with its path (``inputs[0]['ids']``)."""
    if isinstance(x, torch.Tensor):
        yield path, x
    elif isinstance(x, tuple | list):
        for i, v in enumerate(x):
            yield from _walk(v, f"{path}[{i}]")
    elif isinstance(x, dict):
        for k, v in x.items():
            yield from _walk(v, f"{path}[{k!r}]")


def map_tensors(x: Any, fn: Callable[[torch.Tensor], Any]) -> Any:
    """``x`` with every tensor inside its tuples, lists and dicts replaced by ``fn(tensor)``."""
    if isinstance(x, torch.Tensor):
        return fn(x)
    if isinstance(x, tuple) and hasattr(x, "_fields"):  # a namedtuple is rebuilt from its fields
        return type(x)(*(map_tensors(v, fn) for v in x))
    if isinstance(x, tuple | list):
        return type(x)(map_tensors(v, fn) for v in x)
    if isinstance(x, dict):
        return _rebuild_dict(x, {k: map_tensors(v, fn) for k, v in x.items()})
    return x


def tensors(x: Any, found: list[torch.Tensor] | None = None) -> list[torch.Tensor]:
    """Every tensor inside ``x``'s tuples, lists and dicts, in :func:`map_tensors`'s order (appended to ``found``
    when given); nothing is rebuilt, so it is the cheap walk for a per-step check."""
    found = [] if found is None else found
    if isinstance(x, torch.Tensor):
        found.append(x)
    elif isinstance(x, tuple | list):
        for v in x:
            tensors(v, found)
    elif isinstance(x, dict):
        for v in x.values():
            tensors(v, found)
    return found


def _rebuild_dict(like: dict, items: dict) -> dict:
    try:
        return type(like)(items)
    except Exception:  # a dict subclass whose constructor takes something else
        return items


def to_device(x: Any, device: torch.device) -> Any:
    """``x`` with every tensor on ``device`` (non-blocking: asynchronous from pinned memory)."""
    return map_tensors(x, lambda t: t if t.device == device else t.to(device, non_blocking=True))


def shard_sizes(batch: int, n: int) -> list[int]:
    """Samples per replica for a batch of ``batch`` over ``n`` replicas (``torch.tensor_split``'s sizes)."""
    q, r = divmod(batch, n)
    return [q + 1 if i < r else q for i in range(n)]


def batch_size(x: Any, arg: str) -> int | None:
    """The common dim-0 size of every tensor in ``x``; None when ``x`` holds no tensor.

    Raises:
        BatchError: a 0-dim tensor (nothing to split), or two tensors whose dim 0 differ.
    """
    return _common_size(_walk(x, arg))


def _common_size(tensors: Iterator[tuple[str, torch.Tensor]]) -> int | None:
    first: tuple[str, int] | None = None
    for path, t in tensors:
        if t.dim() == 0:
            raise BatchError(f"{path}: expected a tensor with a batch dimension (dim 0 = samples), but got a 0-dim "
                             f"tensor; pass a per-batch constant as a Python number, or give it a dim 0")
        if first is None:
            first = (path, t.shape[0])
        elif t.shape[0] != first[1]:
            raise BatchError(f"{path}: expected dim 0 = {first[1]} samples, as {first[0]} has, but got "
                             f"{t.shape[0]} (shape {list(t.shape)}); every tensor of a batch must hold the "
                             f"same samples along dim 0")
    return None if first is None else first[1]


def _call_tensors(args: tuple, kwargs: dict) -> Iterator[tuple[str, torch.Tensor]]:
    for i, a in enumerate(args):
        yield from _walk(a, f"inputs[{i}]")
    for k, v in kwargs.items():
        yield from _walk(v, f"inputs[{k!r}]")


def split_call(args: tuple, kwargs: dict, n: int) -> tuple[list[int], list[tuple[tuple, dict]]]:
    """:func:`split` for a call's positional and keyword arguments (named ``inputs[0]``, ``inputs['mask']``)."""
    size = _common_size(_call_tensors(args, kwargs))
    _check_count(size, n, "inputs", f"{len(args)} positional and {len(kwargs)} keyword argument(s)")
    if n == 1:
        return [size], [(args, kwargs)]
    return shard_sizes(size, n), list(zip(_split(args, n), _split(kwargs, n), strict=True))


def _check_count(size: int | None, n: int, arg: str, got: str) -> None:
    if size is None:
        raise BatchError(f"{arg}: expected at least one tensor to split along dim 0 over the {n} replica(s), but "
                         f"got none ({got}); pass the batch as a tensor (or tuples/dicts of them)")
    if size < n:
        raise BatchError(f"{arg}: expected a batch of at least {n} samples (one per replica), but got {size}; "
                         f"use a larger batch or fewer devices")


def split(x: Any, n: int, arg: str = "inputs") -> tuple[list[int], list[Any]]:
    """Check ``x`` and split it into ``n`` shards: ``(sizes, shards)``.

    Raises:
        BatchError: no tensor, a 0-dim tensor, dim 0 sizes that differ, or fewer samples than replicas.
    """
    size = batch_size(x, arg)
    _check_count(size, n, arg, type(x).__name__)
    return shard_sizes(size, n), _split(x, n) if n > 1 else [x]


def split_like(x: Any, sizes: list[int], arg: str = "targets") -> list[Any]:
    """Split ``x`` into shards of exactly ``sizes`` (the targets of a forward that was split so).

    Raises:
        BatchError: no tensor, a 0-dim tensor, or a dim 0 other than ``sum(sizes)``.
    """
    size = batch_size(x, arg)
    if size is None:
        raise BatchError(f"{arg}: expected tensors with dim 0 = {sum(sizes)} samples (the forward's batch), but "
                         f"got none ({type(x).__name__}); pass the targets as a tensor (or tuples/dicts of them)")
    if size != sum(sizes):
        raise BatchError(f"{arg}: expected dim 0 = {sum(sizes)} samples, the batch the outputs came from, but got "
                         f"{size}; pass the targets of the same batch")
    return _split(x, len(sizes))


def _split(x: Any, n: int) -> list[Any]:
    if isinstance(x, torch.Tensor):
        return list(torch.tensor_split(x, n))
    if isinstance(x, tuple | list):
        parts = [_split(v, n) for v in x]
        if isinstance(x, tuple) and hasattr(x, "_fields"):
            return [type(x)(*(p[i] for p in parts)) for i in range(n)]
        return [type(x)(p[i] for p in parts) for i in range(n)]
    if isinstance(x, dict):
        parts = {k: _split(v, n) for k, v in x.items()}
        return [_rebuild_dict(x, {k: p[i] for k, p in parts.items()}) for i in range(n)]
    return [x] * n
