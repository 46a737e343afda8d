"""``single``: the whole global batch on one device — the baseline every other strategy is held to."""

from __future__ import annotations

from typing import Any

import torch

from gpucomm.train.models import Workload
from gpucomm.train.strategies.base import (
    StepResult,
    Strategy,
    make_optimizer,
    parameter_state,
)

__all__ = ["SingleStrategy"]


class SingleStrategy(Strategy):
    """Plain training on ``devices[0]``: forward, loss over the global batch, backward, AdamW step."""

    name = "single"

    def __init__(self, config, devices) -> None:
        super().__init__(config, list(devices)[:1])

    def prepare(self, workload: Workload) -> None:
        self._build_on_first_device(workload)
        self.optimizer = make_optimizer(self.model.parameters(), self.device, self.config)

    def step(self, step: int, batch: tuple[Any, Any]) -> StepResult:
        return self._plain_step(self.model, batch)

    def state(self) -> dict[str, torch.Tensor]:
        return parameter_state(self.model)
