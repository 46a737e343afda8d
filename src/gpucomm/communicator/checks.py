"""Argument checks both Communicator implementations share (messages name the argument and the fix)."""

from __future__ import annotations

import functools
import operator
from collections.abc import Sequence

import torch

from gpucomm import collectives
from gpucomm._validate import check_tensor_list, describe, fail_type, fail_value
from gpucomm.collectives import Collective, ReduceOp
from gpucomm.collectives.spec import CHUNK, CHUNK_COUNT, ROOT
from gpucomm.communicator.base import Communicator

_SHAPE = operator.attrgetter("shape")

__all__ = ["check_avg_dtype", "check_held", "check_root", "check_shape", "check_shapes", "check_splits",
           "same_device"]


def same_device(t: torch.Tensor, device: torch.device) -> bool:
    return t.device.type == device.type and (device.index is None or t.device.index == device.index)


def check_held(comm: Communicator, tensors, arg: str, *, optional: bool = False) -> list:
    """One tensor per held participant, each on its participant's device (``None`` allowed if optional)."""
    if optional:
        if isinstance(tensors, torch.Tensor) or not isinstance(tensors, Sequence):
            raise fail_type(arg, "a sequence with one tensor (or None) per held participant", tensors,
                            "wrap a single tensor in a list: [t]")
        items = list(tensors)
    else:
        items = check_tensor_list(tensors, arg)
    devices = comm.devices
    if len(items) == len(devices) and all(  # the common case, checked in one pass of C-level compares
            type(t) is torch.Tensor and t.device == d for t, d in zip(items, devices)):  # noqa: B905
        return items
    if len(items) != len(devices):
        raise fail_value(arg, f"{len(devices)} tensor(s), one per participant this process holds "
                              f"({[str(d) for d in devices]})", f"{len(items)}")
    for i, (t, d) in enumerate(zip(items, devices, strict=True)):
        if t is None:
            if not optional:
                raise fail_type(f"{arg}[{i}]", "a torch.Tensor", t)
            continue
        if not isinstance(t, torch.Tensor):
            raise fail_type(f"{arg}[{i}]", "a torch.Tensor or None", t)
        if not same_device(t, d):
            raise fail_value(f"{arg}[{i}]", f"a tensor on {d} (participant {comm.participants[i]}'s device)",
                             describe(t), f"move it with .to('{d}')")
    return items


def check_root(comm: Communicator, root: int, arg: str = "root") -> int:
    if isinstance(root, bool) or not isinstance(root, int):
        raise fail_type(arg, "an int participant index", root)
    if not 0 <= root < comm.n:
        raise fail_value(arg, f"a participant index in [0, {comm.n})", f"{root}")
    return root


def check_shape(arg: str, t: torch.Tensor, expected: tuple[int, ...], why: str) -> None:
    if tuple(t.shape) != tuple(expected):
        raise fail_value(arg, f"shape {list(expected)} ({why})", f"shape {list(t.shape)}",
                         "allocate it with that shape")


def check_splits(arg: str, t: torch.Tensor, n: int) -> None:
    if t.dim() == 0 or t.shape[0] % n:
        raise fail_value(arg, f"a tensor whose dim 0 splits into n={n} equal chunks", describe(t),
                         f"pad or trim dim 0 to a multiple of {n}")


def check_avg_dtype(op: str | ReduceOp, t: torch.Tensor) -> None:
    from gpucomm.collectives import parse_op

    if parse_op(op) is ReduceOp.AVG and not (t.is_floating_point() or t.is_complex()):
        raise fail_value("op", "a floating-point tensor for op='avg'", f"dtype {t.dtype}",
                         "use op='sum' and divide yourself, or cast to a float dtype")


@functools.lru_cache(maxsize=512)
def _output_shape(name: str, shape: torch.Size, n: int) -> torch.Size:
    """Row ``name``'s ``output_shape(shape, n)``, remembered (the same buffers come back call after call);
    a shape that does not split raises, and is not cached."""
    return torch.Size(collectives.get(name).output_shape(shape, n))


def check_shapes(row: Collective, n: int, ins: Sequence, outs: Sequence, root: int = 0, rank: int = 0,
                 outputs: str = "outputs", inputs: str = "inputs") -> None:
    """The shapes ``row`` implies between one call's held outputs and inputs, along dim 0.

    all_gather, gather: an output is n inputs; reduce_scatter, scatter: an output is one of n chunks of
    an input (the root's, for scatter); all_to_all: the input splits into n chunks and the output has its
    shape; send_recv: the output has the input's shape.  ``root`` is the root's participant index and
    ``rank`` this process's (a LocalCommunicator's is 0).  In-place calls (one list) relate nothing here,
    and neither do rows whose method takes its own split sizes (all_to_all_v: the library checks them;
    callers leave them out).
    """
    if ins is outs:
        return
    if row.input_buffer == CHUNK or row.output_buffer == CHUNK:
        k = root - rank * len(outs)  # the root's slot among the held participants (rooted rows)
        first = 0
        if row.input_buffer == ROOT:  # every output is one chunk of the root's input
            if not 0 <= k < len(ins):
                return
            want, first, targets = _shaped(row, ins[k], n, f"{inputs}[{k}]"), k, outs
        elif row.output_buffer == ROOT:  # the root's output is every input concatenated
            if not 0 <= k < len(outs):
                return
            want, targets = _shaped(row, ins[0], n, f"{inputs}[0]"), [outs[k]]
        else:
            want, targets = _shaped(row, ins[0], n, f"{inputs}[0]"), outs
        if all(map(want.__eq__, map(_SHAPE, targets))):  # the common case: one C-level pass
            return
        for i, o in enumerate(outs):
            if (o is targets[0] if len(targets) == 1 else True) and o.shape != want:
                check_shape(f"{outputs}[{i}]", o, tuple(want), f"{row.name} of n={n} participants' inputs of "
                            f"shape {list(ins[first].shape)} along dim 0")
        return
    for i, (o, t) in enumerate(zip(outs, ins, strict=True)):
        if row.count_unit == CHUNK_COUNT:
            check_splits(f"{inputs}[{i}]", t, n)
        if o.shape != t.shape:
            check_shape(f"{outputs}[{i}]", o, tuple(t.shape), f"{inputs}[{i}]'s shape")


def _shaped(row: Collective, t: torch.Tensor, n: int, arg: str) -> torch.Size:
    try:
        return _output_shape(row.name, t.shape, n)
    except ValueError:
        if row.output_buffer == CHUNK:
            check_splits(arg, t, n)
        raise
