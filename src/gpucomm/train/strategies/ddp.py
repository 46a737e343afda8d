"""``ddp``: ``torch.nn.parallel.DistributedDataParallel``, one process per device.

The processes are started (or, under torchrun/SLURM, joined) by :mod:`gpucomm.train.launching`, as
for every ``per_process`` strategy; this module only says what one rank does.

Each rank takes shard ``rank`` of the same global batch (split in order), so rank shards are exactly
the shards ``replicated`` gives its devices.  DDP averages gradients (sum / world size), so the
gradient is that of the global-batch mean, as in ``single``.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.nn.parallel import DistributedDataParallel

from gpucomm.train.config import TrainConfig
from gpucomm.train.models import Workload
from gpucomm.train.strategies.base import (
    StepResult,
    Strategy,
    make_optimizer,
    parameter_state,
    split_batch,
)

__all__ = ["DDPStrategy"]


class DDPStrategy(Strategy):
    """DDP on this rank's device; ``bucket_cap_mb`` from the config (DDP's default 25 MiB)."""

    name = "ddp"
    per_process = True

    def __init__(self, config: TrainConfig, devices, *, rank: int = 0, world_size: int = 1) -> None:
        super().__init__(config, devices)
        self.rank, self.world_size = rank, world_size

    def prepare(self, workload: Workload) -> None:
        self._build_on_first_device(workload)
        ids = [self.device.index] if self.device.type == "cuda" else None
        self.ddp = DistributedDataParallel(self.model, device_ids=ids, bucket_cap_mb=self.config.bucket_cap_mb)
        self.optimizer = make_optimizer(self.ddp.parameters(), self.device, self.config)

    def step(self, step: int, batch: tuple[Any, Any]) -> StepResult:
        shard = split_batch(batch, self.world_size, self.config.global_batch)[self.rank]
        return self._plain_step(self.ddp, shard)

    def state(self) -> dict[str, torch.Tensor]:
        return parameter_state(self.model)
