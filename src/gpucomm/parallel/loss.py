"""The loss of the global batch from each replica's loss on its shard, weighted so the math equals one device.

Each replica computes ``loss_fn(output_i, targets_i)`` on its ``b_i`` of the batch's ``B`` samples.

* ``reduction="mean"`` (the loss is a mean over the samples it is given, as torch's losses default to):
  the batch's loss is ``sum_i (b_i / B) * loss_i`` — each replica weighted by its share, so an uneven
  split (10 samples over 3 replicas: 4, 3, 3) gives exactly the mean over all B samples;
* ``reduction="sum"``: the batch's loss is ``sum_i loss_i``.

The value is that weighted sum, on one device.  Its backward hands replica ``i`` the gradient
``weight_i * scale``: ``scale`` undoes the averaging of the gradient all-reduce (see
:mod:`gpucomm.parallel.outputs`), so the averaged gradient is the gradient of the value.  For a mean
over equal shards in one process, ``weight_i * scale`` is exactly 1: nothing is multiplied.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

__all__ = ["REDUCTIONS", "check_loss", "combine", "weighted_sum", "weights"]

REDUCTIONS = ("mean", "sum")


class _WeightedSum(torch.autograd.Function):
    """``sum_i weights[i] * losses[i]`` on ``device``; backward gives loss ``i`` ``grad * factors[i]``."""

    @staticmethod
    def forward(ctx, device: torch.device, weights: tuple[float, ...], factors: tuple[float, ...],
                *losses: torch.Tensor) -> torch.Tensor:
        ctx.devices = [t.device for t in losses]
        ctx.factors = factors
        return weighted_sum(losses, weights, device)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        grads = [None if not need else (grad * f if f != 1 else grad).to(d)
                 for f, d, need in zip(ctx.factors, ctx.devices, ctx.needs_input_grad[3:], strict=True)]
        return (None, None, None, *grads)


def weighted_sum(losses: Sequence[torch.Tensor], weights: Sequence[float], device: torch.device) -> torch.Tensor:
    """``sum_i weights[i] * losses[i]`` on ``device``, term by term in replica order (the value of :func:`combine`,
    bit for bit; no autograd of its own: graphs compute their step's loss with it).  ``losses[0]`` itself when
    it is the whole sum (one loss of weight 1, already on ``device``)."""
    total = None
    for w, t in zip(weights, losses, strict=True):
        term = t.to(device)
        term = term * w if w != 1 else term
        total = term if total is None else total + term
    return total


def check_loss(loss: Any, replica: int) -> torch.Tensor:
    """``loss`` as a 0-dim tensor if it is a one-element floating tensor; else TypeError/ValueError."""
    if not isinstance(loss, torch.Tensor):
        raise TypeError(f"loss_fn: expected a scalar tensor (replica {replica}'s loss), but got "
                        f"{type(loss).__name__}; return e.g. F.cross_entropy(outputs, targets)")
    if loss.numel() != 1 or not loss.is_floating_point():
        raise ValueError(f"loss_fn: expected a one-element floating tensor (replica {replica}'s loss), but got "
                         f"shape {list(loss.shape)} {loss.dtype}; reduce it with .mean() or .sum() (and say "
                         f"which with reduction=)")
    return loss.reshape(())


def weights(sizes: Sequence[int], reduction: str) -> tuple[float, ...]:
    """Each replica's weight in the batch's loss (module notes)."""
    total = sum(sizes)
    return tuple(b / total for b in sizes) if reduction == "mean" else (1.0,) * len(sizes)


def combine(losses: Sequence[torch.Tensor], sizes: Sequence[int], reduction: str, scale: int,
            device: torch.device) -> torch.Tensor:
    """The batch's loss on ``device`` from the replicas' losses (module notes); ``losses[0]`` itself for one
    replica whose gradient needs no factor.

    ``scale`` is an integer, so a mean's factor ``scale * b_i / B`` is computed from integers and is exactly 1.0
    for equal shards in one process.
    """
    total = sum(sizes)
    factors = tuple(scale * b / total for b in sizes) if reduction == "mean" else (float(scale),) * len(sizes)
    w = weights(sizes, reduction)
    if len(losses) == 1 and w[0] == 1 and factors[0] == 1 and losses[0].device == device:
        return losses[0]
    return _WeightedSum.apply(device, w, factors, *losses)
