"""What a split forward returns: one output per replica, left on its replica's device (``PerReplica``).

``nn.DataParallel`` gathers every output onto one device after every forward; most training loops
only reduce the outputs to a loss, which each replica can compute where its output already is
(:meth:`ReplicatedDataParallel.loss <gpucomm.parallel.ReplicatedDataParallel.loss>`).  So outputs
stay put unless asked: :meth:`PerReplica.gather` (or ``output_device=`` on the wrapper) concatenates
them along dim 0 on one device, tensors inside tuples, lists, dicts and dataclasses alike, 0-dim
tensors stacked into one value per replica (as DataParallel does), other values taken from replica 0.

**Gradients through a gather.**  A loss computed from gathered outputs back-propagates through the
gather, which hands each replica the gradient of its own samples multiplied by ``grad_scale``, the
number of replicas in this process.  The gradient all-reduce *averages* over every replica, so the
factor cancels, and the parameters get exactly the gradient of the loss you computed, whatever its
reduction (sum or mean).  The factor is why the all-reduce can average, as DDP's does: gradient
accumulation, several backward passes per step and the process-group forms then need no special case.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from typing import Any

import torch

__all__ = ["PerReplica", "gather"]


class _Gather(torch.autograd.Function):
    """Concatenate (or stack, for 0-dim values) onto ``device``; backward: split, scale, return home."""

    @staticmethod
    def forward(ctx, device: torch.device, scale: float, stack: bool, *tensors: torch.Tensor) -> torch.Tensor:
        ctx.devices = [t.device for t in tensors]
        ctx.sizes = [t.shape[0] for t in tensors] if not stack else None
        ctx.scale, ctx.stack = scale, stack
        moved = [t.to(device) for t in tensors]
        return torch.stack(moved) if stack else torch.cat(moved)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        parts = grad.unbind(0) if ctx.stack else grad.split(ctx.sizes)
        return (None, None, None, *(None if not need else _scaled_to(p, ctx.scale, d)
                                    for p, d, need in zip(parts, ctx.devices, ctx.needs_input_grad[3:], strict=True)))


def _scaled_to(part: torch.Tensor, scale: float, device: torch.device) -> torch.Tensor:
    """``part * scale`` on ``device``, made once: a part that is copied to another device is scaled in place
    there (``part`` is a view of the incoming gradient, which autograd may share, so never scaled in place)."""
    moved = part.to(device)
    if scale == 1:
        return moved
    return moved.mul_(scale) if moved.device != part.device else moved * scale


def _gather_tensors(tensors: list[torch.Tensor], device: torch.device, scale: float) -> torch.Tensor:
    stack = tensors[0].dim() == 0
    if torch.is_grad_enabled() and any(t.requires_grad for t in tensors):
        return _Gather.apply(device, scale, stack, *tensors)
    moved = [t.to(device) for t in tensors]
    return torch.stack(moved) if stack else torch.cat(moved)


def gather(values: Sequence[Any], device: torch.device, scale: float = 1.0) -> Any:
    """Concatenate per-replica values of one structure along dim 0 on ``device`` (see the module notes)."""
    first = values[0]
    if isinstance(first, torch.Tensor):
        return _gather_tensors(list(values), device, scale)
    if dataclasses.is_dataclass(first) and not isinstance(first, type):
        changes = {f.name: gather([getattr(v, f.name) for v in values], device, scale)
                   for f in dataclasses.fields(first) if f.init}
        return dataclasses.replace(first, **changes)
    if isinstance(first, tuple) and hasattr(first, "_fields"):
        return type(first)(*(gather(col, device, scale) for col in zip(*values, strict=True)))
    if isinstance(first, tuple | list):
        return type(first)(gather(col, device, scale) for col in zip(*values, strict=True))
    if isinstance(first, dict):
        items = {k: gather([v[k] for v in values], device, scale) for k in first}
        try:
            return type(first)(items)
        except Exception:
            return items
    return first


class PerReplica(Sequence):
    """One value per replica, each on its replica's device: what a forward of the wrapper returns.

    Indexing and iteration give the replicas' values in replica order (replica ``i`` holds samples
    ``sum(sizes[:i]) .. sum(sizes[:i+1])`` of the batch).

    Attributes:
        values: the per-replica values (each what the module returned for its shard).
        devices: each replica's device.
        sizes: each replica's sample count.
        grad_scale: the gradient factor a gather applies (the module notes say why).
    """

    __slots__ = ("devices", "grad_scale", "sizes", "values")

    def __init__(self, values: Sequence[Any], devices: Sequence[torch.device], sizes: Sequence[int],
                 grad_scale: float = 1.0) -> None:
        self.values = tuple(values)
        self.devices = tuple(devices)
        self.sizes = tuple(sizes)
        self.grad_scale = grad_scale

    def __len__(self) -> int:
        return len(self.values)

    def __getitem__(self, i):  # type: ignore[override]
        return self.values[i]

    def __iter__(self) -> Iterator[Any]:
        return iter(self.values)

    def __repr__(self) -> str:
        return (f"PerReplica({len(self.values)} replicas on {[str(d) for d in self.devices]}, "
                f"samples {list(self.sizes)})")

    def gather(self, device: torch.device | str | int | None = None) -> Any:
        """The values concatenated along dim 0 on ``device`` (default: the first replica's), in sample order.

        Differentiable: a loss computed from the result trains the replicas correctly (module notes).
        """
        if device is None:
            target = self.devices[0]
        else:
            from gpucomm.devices import parse_device

            target = parse_device(device, arg="device")
        if len(self.values) == 1 and self.devices[0] == target:
            return self.values[0]
        return gather(self.values, target, self.grad_scale)
