"""Bucketing for the ``*_coalesced`` functions: many small tensors moved as a few flat buffers.

Mirrors torch (``torch/csrc/cuda/comm.cpp`` ``broadcast_coalesced``, ``torch/nn/parallel/comm.py``
``reduce_add_coalesced``): tensors are grouped by type into buckets of at most ``buffer_size`` bytes
(in order within a type), each dense bucket is flattened into one buffer, moved or reduced, and
split back; sparse tensors travel as flattened indices plus values.  Results come back in input order
and each result tensor gets its own version counter (``.data``; see torch's NOTE [ Version Counter in
comm.*_coalesced ]): they are views of one flat buffer, and an in-place change to one must not look
like a change to another to autograd.  Where ``devices`` lists ``devices[0]`` again, torch hands
those entries views of one and the same flat copy; here they get the very same tensors (split once).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch._utils import (
    _flatten_dense_tensors,
    _flatten_sparse_tensors,
    _reorder_tensors_as,
    _take_tensors,
    _unflatten_dense_tensors,
    _unflatten_sparse_tensors,
)

__all__ = ["broadcast_buckets", "reduce_buckets"]

Broadcast = Callable[[torch.Tensor, list[torch.device]], list[torch.Tensor]]
ReduceAdd = Callable[[Sequence[torch.Tensor], torch.device], torch.Tensor]


def _dense_buckets(tensors: list[torch.Tensor], buffer_size: int) -> list[list[torch.Tensor]] | None:
    """``_take_tensors``' buckets when every tensor is dense with one dtype (one type: no ``.type()``
    strings, no reordering), else None.  The caller guarantees one device."""
    dtype = tensors[0].dtype
    for t in tensors:
        if t.layout != torch.strided or t.dtype != dtype:
            return None
    buckets: list[list[torch.Tensor]] = []
    bucket: list[torch.Tensor] = []
    size = 0
    for t in tensors:
        nbytes = t.nbytes
        if size + nbytes > buffer_size and size > 0:  # _take_tensors' rule, byte for byte
            buckets.append(bucket)
            bucket, size = [], 0
        bucket.append(t)
        size += nbytes
    buckets.append(bucket)
    return buckets


def broadcast_buckets(tensors: list[torch.Tensor], devices: list[torch.device], buffer_size: int,
                      broadcast: Broadcast) -> list[list[torch.Tensor]]:
    """One list per device; ``devices[0]``'s list holds the input tensors themselves."""
    outputs: list[list[torch.Tensor]] = [list(tensors)] + [[] for _ in devices[1:]]
    if not tensors:
        return outputs
    dense = _dense_buckets(tensors, buffer_size)
    buckets = dense if dense is not None else list(_take_tensors(tensors, buffer_size))
    types = set()
    for bucket in buckets:
        if dense is None:
            types.add(bucket[0].type())
        if bucket[0].is_sparse:
            indices, values = _flatten_sparse_tensors(bucket)
            copies = zip(broadcast(indices, devices), broadcast(values, devices), strict=True)
            for k, (i, v) in enumerate(copies):
                if k:
                    outputs[k].extend(t.data for t in _unflatten_sparse_tensors((i, v), bucket))
        else:
            split: dict[int, list[torch.Tensor]] = {}  # a device listed again gets the same flat buffer
            for k, flat in enumerate(broadcast(_flatten_dense_tensors(bucket), devices)):
                if k:
                    parts = split.get(id(flat))
                    if parts is None:
                        parts = split[id(flat)] = [t.data for t in _unflatten_dense_tensors(flat, bucket)]
                    outputs[k].extend(parts)
    if len(types) > 1:  # buckets are ordered within a type only
        outputs[1:] = [list(_reorder_tensors_as(o, tensors)) for o in outputs[1:]]
    return outputs


def reduce_buckets(inputs: list[list[torch.Tensor]], destination: torch.device, buffer_size: int,
                   reduce_add: ReduceAdd, reduce_flat: ReduceAdd | None = None) -> tuple[torch.Tensor, ...]:
    """Position-wise sums of ``inputs[g][k]`` over groups g, in the order of ``inputs[0]``.

    ``reduce_add`` sums a sparse position; ``reduce_flat`` (default ``reduce_add``) sums the flat
    buffers of a bucket, which are dense, of one shape and dtype, and made here: the caller may pass
    an unchecked kernel for them.
    """
    reduce_flat = reduce_flat or reduce_add
    if all(_all_dense_one_dtype(g) for g in inputs) and inputs[0]:
        buckets = [_dense_buckets(g, buffer_size) for g in inputs]  # no sparse, no reordering needed
        output: list[torch.Tensor] = []
        for chunks in zip(*buckets, strict=True):
            flat = reduce_flat([_flatten_dense_tensors(c) for c in chunks], destination)
            output.extend(t.data for t in _unflatten_dense_tensors(flat, chunks[0]))
        return tuple(output)
    dense: list[list[torch.Tensor]] = [[] for _ in inputs]
    output: list[torch.Tensor] = []
    ref_order: list[torch.Tensor] = []
    for position in zip(*inputs, strict=True):
        if all(t.is_sparse for t in position):
            output.append(reduce_add(position, destination))
            ref_order.append(position[0])
        else:
            for group, t in zip(dense, position, strict=True):
                group.append(t.to_dense() if t.is_sparse else t)
            ref_order.append(dense[0][-1])
    buckets = [_take_tensors(group, buffer_size) for group in dense]
    for chunks in zip(*buckets, strict=True):
        flat = reduce_flat([_flatten_dense_tensors(c) for c in chunks], destination)
        output.extend(t.data for t in _unflatten_dense_tensors(flat, chunks[0]))
    return tuple(_reorder_tensors_as(output, ref_order))


def _all_dense_one_dtype(group: list[torch.Tensor]) -> bool:
    if not group:
        return True
    dtype = group[0].dtype
    return all(t.layout == torch.strided and t.dtype == dtype for t in group)
