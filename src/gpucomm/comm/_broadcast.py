"""``broadcast`` and ``broadcast_coalesced``: a full copy of a tensor on every listed device."""

from __future__ import annotations

import functools
from typing import Any

import torch

from gpucomm._validate import check_tensor, describe, fail_value
from gpucomm.comm import _coalesce, _copy, _kernels, _nccl
from gpucomm.comm._alloc import empty_on
from gpucomm.comm._checks import (
    check_disjoint,
    check_exactly_one,
    check_int,
    check_tensors,
    devices_arg,
)
from gpucomm.comm._prepare import prepared_form

__all__ = ["bind_broadcast", "broadcast", "broadcast_coalesced", "broadcast_outputs", "check_broadcast_out"]


def broadcast(tensor: torch.Tensor, devices: Any = None, *, out: Any = None) -> list[torch.Tensor]:
    """Copy the **whole** ``tensor`` to every device (drop-in for ``torch.cuda.comm.broadcast``).

    Semantics:
        * Exactly one of ``devices`` and ``out`` is given.
        * With ``devices``: returns a list with one tensor per listed device, each equal to
          ``tensor``.  Where a listed device is ``tensor``'s own, that slot *is* ``tensor`` (no copy),
          as many times as the device is listed; other slots are new contiguous tensors (a device
          listed twice gets two distinct copies).  Nothing is ever split: that is :func:`scatter`.
        * With ``out``: copies ``tensor`` into every ``out`` tensor (shape must match; a different
          dtype is cast, as ``copy_`` casts) and returns ``out`` as a list.  ``out`` may contain
          ``tensor`` itself.
        * Devices may be CUDA devices or ``'cpu'``; on GPUs NCCL is used when the source and every
          new copy are dense, contiguous and on distinct GPUs, copies otherwise.

    Args:
        tensor: the source, on CPU or a GPU.
        devices: devices to copy to (ints, strings or ``torch.device``).
        out: tensors to copy into.

    Returns:
        ``list[Tensor]``, one per device (or the ``out`` tensors).
    """
    if devices is None and (type(out) is list or type(out) is tuple):
        done = _kernels.broadcast_out(tensor, out)  # torch.cuda.comm's C++ loop, if it may take the call
        if done is not None:
            return done
    check_tensor(tensor, "tensor")
    check_exactly_one("broadcast", "devices", devices, "out", out)
    if devices is not None:
        return _to_devices(tensor, devices_arg(devices))
    outs = check_broadcast_out(tensor, out)
    _into(tensor, [o for o in outs if o is not tensor])  # the source as its own output: nothing to copy
    return outs


def check_broadcast_out(tensor: torch.Tensor, out: Any) -> list[torch.Tensor]:
    """:func:`broadcast`'s ``out`` checks (``tensor`` already checked)."""
    outs = check_tensors(out, "out")
    check_disjoint(outs, same_value=True)
    for i, o in enumerate(outs):
        if o.shape != tensor.shape:
            raise fail_value(f"out[{i}]", f"shape {list(tensor.shape)} (the source tensor's shape)",
                             f"shape {list(o.shape)}", "broadcast copies the whole tensor into every output")
        if o.layout != tensor.layout:
            raise fail_value(f"out[{i}]", f"layout {tensor.layout} (the source's)", describe(o))
    return outs


def broadcast_outputs(tensor: torch.Tensor, devices: Any) -> list[torch.Tensor]:
    """New outputs for :func:`broadcast` with ``devices`` (checked here): the source itself where it lives."""
    devs = devices_arg(devices)
    cuda = tensor.is_cuda or any(d.type == "cuda" for d in devs)
    return [tensor if d == tensor.device else empty_on(tensor.shape, tensor.dtype, d, pinned=cuda) for d in devs]


def _to_devices(tensor: torch.Tensor, devices: list[torch.device]) -> list[torch.Tensor]:
    home = tensor.device
    if devices.count(home) == len(devices):  # every slot is the tensor itself, as in torch
        return [tensor] * len(devices)
    if tensor.layout != torch.strided:  # sparse: torch's plain per-device copy
        return [tensor if d == home else tensor.to(d, copy=True) for d in devices]
    cuda = tensor.is_cuda or any(d.type == "cuda" for d in devices)
    firsts: dict[torch.device, torch.Tensor] = {}
    repeats: list[_copy.Pair] = []
    slots = []
    for d in devices:
        if d == home:
            slots.append(tensor)
            continue
        new = empty_on(tensor.shape, tensor.dtype, d, pinned=cuda)
        if d in firsts:
            repeats.append((new, firsts[d]))  # a second copy on a device comes from the first one there
        else:
            firsts[d] = new
        slots.append(new)
    targets = list(firsts.values())
    if targets:
        _send(tensor, targets)
    if repeats:
        _copy.copy_all(repeats)
    return slots


def _into(tensor: torch.Tensor, outs: list[torch.Tensor]) -> None:
    """Copy ``tensor`` into every checked output (outputs may be, or overlap, ``tensor``)."""
    if tensor.layout != torch.strided:
        for o in outs:
            if o is not tensor:
                o.copy_(tensor)
        return
    if _copy.any_overlap(outs, [tensor]):  # storages compared first: no extent arithmetic when disjoint
        _copy.copy_all(_copy.protect([(o, tensor) for o in outs], outs))
        return
    _send(tensor, outs)


def _send(tensor: torch.Tensor, targets: list[torch.Tensor]) -> None:
    """Copy ``tensor`` into ``targets``, none of which overlaps it."""
    group = [tensor, *targets]
    if _nccl.usable(group):
        _nccl.broadcast(group, root=0)
    elif _kernels.BROADCAST_OUT is not None and _kernels.cuda_alike(targets, tensor):
        _kernels.BROADCAST_OUT(tensor, targets)  # torch.cuda.comm's own C++ loop: no Python per copy
    else:
        _copy.copy_all([(t, tensor) for t in targets])


def broadcast_coalesced(tensors: Any, devices: Any, buffer_size: int = 10485760) -> list[list[torch.Tensor]]:
    """Broadcast many tensors at once, in flat buckets (drop-in for ``torch.cuda.comm.broadcast_coalesced``).

    Semantics:
        * Every tensor must be on ``devices[0]``.  Returns one list per device; ``devices[0]``'s list
          holds the input tensors themselves, the others hold copies, in input order.
        * Dense tensors are grouped by type into buckets of at most ``buffer_size`` bytes, each
          flattened into one buffer, broadcast and split; sparse tensors travel as indices plus
          values.  Each copy has its own autograd version counter.

    Args:
        tensors: tensors to broadcast, all on ``devices[0]`` (may be empty).
        devices: devices to broadcast to.
        buffer_size: largest bucket, in bytes (default 10 MiB, torch's).

    Returns:
        ``list[list[Tensor]]``: ``result[k][i]`` is tensor ``i`` on ``devices[k]``.
    """
    ts = check_tensors(tensors, "tensors", allow_empty=True)
    devs = devices_arg(devices)
    size = check_int(buffer_size, "buffer_size")
    if size <= 0:
        raise fail_value("buffer_size", "a positive number of bytes", f"{size}", "the default is 10485760")
    for i, t in enumerate(ts):
        if t.device != devs[0]:
            raise fail_value(f"tensors[{i}]", f"a tensor on devices[0] = {devs[0]}", describe(t),
                             "move every tensor to the first listed device, or list its device first")
    return _coalesce.broadcast_buckets(ts, devs, size, _to_devices)


# ----- prepared ---------------------------------------------------------------------------------------
def bind_broadcast(src: torch.Tensor, outs: list[torch.Tensor]) -> _kernels.Run:
    """:func:`_into`'s work on checked outputs with its route decided once (outputs may be ``src``)."""
    targets = [o for o in outs if o is not src]
    if not targets:
        return _kernels.noop
    if _copy.any_overlap(targets, [src]) or src.layout != torch.strided:
        return functools.partial(_into, src, targets)
    if _nccl.usable([src, *targets]):
        return functools.partial(_nccl.broadcast, [src, *targets], 0)
    if _kernels.BROADCAST_OUT is not None and _kernels.cuda_alike(targets, src):
        return functools.partial(_kernels.BROADCAST_OUT, src, targets)
    if _kernels.one_device(targets, src):
        return _kernels.bind_copies(targets, [src] * len(targets))
    return functools.partial(_copy.copy_all, [(t, src) for t in targets])


@prepared_form("broadcast")
def _prepared(inputs, outputs, devices=None):
    check_tensor(inputs, "inputs")
    if outputs is None and devices is None:
        raise TypeError("prepare('broadcast'): expected devices= or outputs=, but got neither; pass "
                        "devices=[...] to have outputs allocated, or outputs=[...] to supply them")
    if outputs is not None:
        if devices is not None:
            check_exactly_one("broadcast", "devices", devices, "outputs", outputs)
        outs = check_broadcast_out(inputs, outputs)
    else:
        outs = broadcast_outputs(inputs, devices)
    return bind_broadcast(inputs, outs), outs, outs


@_kernels.local_form("broadcast")
def _local(held, inputs, outputs, root, op, extra):
    src = inputs[root]  # in place: the root's tensor is the source; the others receive it
    others = outputs[:root] + outputs[root + 1:]
    if _kernels.broadcast_out(src, others) is None:
        broadcast(src, out=list(others) or [src])
