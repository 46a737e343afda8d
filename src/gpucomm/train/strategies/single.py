"""``single``: the whole global batch on one device — the baseline every other strategy is held to.

Eager, it is the plain loop a user writes (forward, loss, backward, optimizer step, ``zero_grad``).
With ``--graphs`` the same step is captured whole in one CUDA graph — forward, backward and the fused
AdamW step (``capturable=True``) — and each step copies its batch into the static input buffers and
replays the graph (:mod:`gpucomm.train.graphs` says how and why).
"""

from __future__ import annotations

from functools import partial
from typing import Any

import torch

from gpucomm.train import graphs
from gpucomm.train.config import TrainConfig
from gpucomm.train.models import Workload
from gpucomm.train.strategies.base import (
    StepResult,
    Strategy,
    call_model,
    make_optimizer,
    parameter_state,
)
from gpucomm.train.strategies.losses import scalar_loss

__all__ = ["SingleStrategy"]


def _loss_of(loss_fn, model, inputs, targets) -> torch.Tensor:
    return scalar_loss(loss_fn(call_model(model, inputs), targets))


class SingleStrategy(Strategy):
    """Plain training on ``devices[0]``: forward, loss over the global batch, backward, AdamW step."""

    name = "single"

    def __init__(self, config: TrainConfig, devices, **kwargs: Any) -> None:
        super().__init__(config, list(devices)[:1], **kwargs)
        self.graphs = bool(config.graphs)
        self._step_graphs: graphs.StepGraphs | None = None

    @classmethod
    def devices_needed(cls, config: TrainConfig) -> list[torch.device]:
        return list(config.devices[:1])

    @classmethod
    def not_applicable(cls, config: TrainConfig) -> str | None:
        return graphs.unavailable(config.devices[:1]) if config.graphs else None

    @classmethod
    def notes(cls, config: TrainConfig) -> list[str]:
        return ["CUDA graphs: the whole step (forward, backward, optimizer) replayed from one graph"] \
            if config.graphs else []

    def prepare(self, workload: Workload) -> None:
        self._build_on_first_device(workload)
        if not self.graphs:
            self.optimizer = make_optimizer(self.model.parameters(), self.device, self.config)
            return
        reason = graphs.unavailable(self.devices)
        if reason:
            raise graphs.GraphCaptureError(f"--graphs: {reason}; run without --graphs")
        self.optimizer = graphs.capturable_optimizer(self.model.parameters(), self.device, self.config.optimizer,
                                                     self.config.lr)
        example = workload.batch_fn(self.config.seed, 0, self.config.global_batch)
        replica = graphs.ReplicaStep(model=self.model, optimizer=self.optimizer,
                                     loss_of=partial(_loss_of, workload.loss_fn), device=self.device,
                                     precision=self.precision, example=example)
        self._step_graphs = graphs.StepGraphs([replica], capture_fn=graphs.capture)
        self._step_graphs.prepare([example])

    def step(self, step: int, batch: tuple[Any, Any]) -> StepResult:
        g = self._step_graphs
        if g is None:
            return self._plain_step(self.model, batch)
        with self.host_phase("load"):
            g.load([batch], step)
        with self.host_phase("replay"):
            g.replay(0)
            loss = g.losses()[0].clone()  # the static loss is overwritten by the next replay
        return StepResult(loss=loss)

    def state(self) -> dict[str, torch.Tensor]:
        return parameter_state(self.model)

    def teardown(self) -> None:
        self._step_graphs = None
