"""Argument checks both Communicator implementations share (messages name the argument and the fix)."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from gpucomm._validate import check_tensor_list, describe, fail_type, fail_value
from gpucomm.collectives import ReduceOp
from gpucomm.communicator.base import Communicator

__all__ = ["check_avg_dtype", "check_held", "check_root", "check_shape", "check_splits", "same_device"]


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
