"""``single``: the whole global batch on one device — the baseline every other strategy is held to.

Eager, it is the plain loop a user writes (forward, loss, backward, optimizer step, ``zero_grad``).
With ``--graphs`` the same step is captured whole in one CUDA graph — forward, backward and the fused
AdamW step (``capturable=True``) — by :class:`gpucomm.parallel.ReplicatedDataParallel` on this one device
(:mod:`gpucomm.train.graphs`), and each step copies its batch into the static input buffers and replays
the graph.
"""

from __future__ import annotations

from typing import Any

import torch

from gpucomm.parallel import GraphCaptureError
from gpucomm.parallel import graphs as parallel_graphs
from gpucomm.train import graphs
from gpucomm.train.config import TrainConfig
from gpucomm.train.models import Workload
from gpucomm.train.strategies.base import (
    StepResult,
    Strategy,
    autocast,
    make_optimizer,
    parameter_state,
)

__all__ = ["SingleStrategy"]


class SingleStrategy(Strategy):
    """Plain training on ``devices[0]``: forward, loss over the global batch, backward, AdamW step."""

    name = "single"

    def __init__(self, config: TrainConfig, devices, **kwargs: Any) -> None:
        super().__init__(config, list(devices)[:1], **kwargs)
        self.graphs = bool(config.graphs)
        self._graphed = None

    @classmethod
    def devices_needed(cls, config: TrainConfig) -> list[torch.device]:
        return list(config.devices[:1])

    @classmethod
    def not_applicable(cls, config: TrainConfig) -> str | None:
        return parallel_graphs.unavailable(config.devices[:1]) if config.graphs else None

    @classmethod
    def notes(cls, config: TrainConfig) -> list[str]:
        return ["CUDA graphs: the whole step (forward, backward, optimizer) replayed from one graph"] \
            if config.graphs else []

    def prepare(self, workload: Workload) -> None:
        if self.graphs and (reason := parallel_graphs.unavailable(self.devices)):
            raise GraphCaptureError(f"--graphs: {reason}; run without --graphs")
        self._build_on_first_device(workload)
        if not self.graphs:
            self.optimizer = make_optimizer(self.model.parameters(), self.device, self.config)
            return
        self._graphed = graphs.wrap(self.model, self.devices, self.config, make_optimizer)
        self._graphed.host_phase = lambda name: self.host_phase(name)
        graphs.capture_first(self._graphed, workload, workload.batch_fn(self.config.seed, 0, self.config.global_batch),
                             autocast(self.device, self.precision))

    def step(self, step: int, batch: tuple[Any, Any]) -> StepResult:
        if self._graphed is None:
            return self._plain_step(self.model, batch)
        with autocast(self.device, self.precision):
            loss = self._graphed.train_step(batch[0], batch[1], loss_fn=self.workload.loss_fn)
        return StepResult(loss=loss)

    def state(self) -> dict[str, torch.Tensor]:
        return parameter_state(self.model)

    def teardown(self) -> None:
        if self._graphed is not None:
            self._graphed.close()
            self._graphed = None
