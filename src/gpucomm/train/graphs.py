"""``gpucomm train --graphs``: :mod:`gpucomm.parallel`'s CUDA graphs, with the comparison's optimizer.

``single`` and ``replicated`` train through :class:`gpucomm.parallel.ReplicatedDataParallel` (one device for
``single --graphs``); the capture, the static buffers, the warm-up that leaves no trace and the all-reduce
between captured segments are the library's (:mod:`gpucomm.parallel.graphs` says how and why).  This module
holds what the comparison adds: its optimizer in the form a graph can capture, and capturing before the
timed steps, with errors that name ``--graphs``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from functools import partial
from typing import Any

import torch

from gpucomm.parallel import GraphCaptureError, ReplicatedDataParallel
from gpucomm.train.config import TrainConfig
from gpucomm.train.models import Workload

EagerOptimizer = Callable[[Any, torch.device, TrainConfig], torch.optim.Optimizer]

__all__ = ["capturable_optimizer", "capture_first", "wrap"]


def capturable_optimizer(params: Any, device: torch.device, optimizer: str, lr: float) -> torch.optim.Optimizer:
    """The optimizer of a graphed step: AdamW, fused on CUDA and ``capturable`` (its step count stays on the
    device, so the bias correction needs no host value), or plain SGD (stateless, capturable as is)."""
    if optimizer == "sgd":
        return torch.optim.SGD(params, lr=lr)
    return torch.optim.AdamW(params, lr=lr, fused=device.type == "cuda", capturable=True)


def _factory(config: TrainConfig, device: torch.device, eager: EagerOptimizer, params: Any) -> torch.optim.Optimizer:
    if config.graphs:
        return capturable_optimizer(params, device, config.optimizer, config.lr)
    return eager(params, device, config)


def wrap(model: torch.nn.Module, devices: list[torch.device], config: TrainConfig, eager: EagerOptimizer,
         **kwargs: Any) -> ReplicatedDataParallel:
    """``model`` (on ``devices[0]``) as the comparison trains it: per replica ``eager(params, device, config)``
    (the strategies' ``make_optimizer``), or with ``config.graphs`` its capturable form."""
    return ReplicatedDataParallel(model, devices, partial(_factory, config, devices[0], eager),
                                  graphs=bool(config.graphs), **kwargs)


def capture_first(model: ReplicatedDataParallel, workload: Workload, batch: tuple[Any, Any],
                  autocast: contextlib.AbstractContextManager) -> None:
    """Capture the graphed step on ``batch`` now, under ``autocast`` (the steps' own), so that no timed step
    captures (the warm-up leaves no trace).

    Raises:
        GraphCaptureError: the step cannot be captured; the message starts with ``--graphs``.
    """
    try:
        with autocast:
            model.capture(batch[0], batch[1], loss_fn=workload.loss_fn)
    except GraphCaptureError as exc:
        raise GraphCaptureError(f"--graphs: {exc}") from exc
