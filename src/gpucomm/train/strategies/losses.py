"""Checking what a loss function returned."""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["scalar_loss"]


def scalar_loss(loss: Any) -> torch.Tensor:
    """Return ``loss`` if it is a one-element floating tensor that can be back-propagated; else raise."""
    if not isinstance(loss, torch.Tensor) or loss.numel() != 1 or not loss.is_floating_point():
        got = type(loss).__name__ if not isinstance(loss, torch.Tensor) else \
            f"tensor(shape={list(loss.shape)}, dtype={loss.dtype})"
        raise ValueError(f"loss_fn: expected a scalar floating tensor (the mean over the batch), but got {got}")
    if not loss.requires_grad:
        raise ValueError("loss_fn: the loss does not require grad; compute it from the model's outputs")
    return loss.reshape(())
