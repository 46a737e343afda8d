"""``ddp``: ``torch.nn.parallel.DistributedDataParallel``, one process per device.

The processes are started (or, under torchrun/SLURM, joined) by :mod:`gpucomm.train.launching`, as
for every strategy that ``needs_process_group``; this module only says what one rank does and which
devices the ranks take.

Each rank takes shard ``rank`` of the same global batch (split in order), so rank shards are exactly
the shards ``replicated`` gives its devices.  DDP averages gradients (sum / world size), so the
gradient is that of the global-batch mean, as in ``single``.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.nn.parallel import DistributedDataParallel

from gpucomm.train.config import ConfigError, TrainConfig
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

    @classmethod
    def devices_needed(cls, config: TrainConfig) -> list[torch.device]:
        """One device per rank: the distinct CUDA devices of ``--devices`` (NCCL allows one rank per GPU),
        or the CPU list as given; ``--nproc`` takes the first ``nproc`` of them (on CPU it repeats the list).

        Raises:
            ConfigError: ``--nproc`` asks for more GPUs than ``--devices`` names.
        """
        if config.device_type == "cuda":
            devices = list(dict.fromkeys(config.devices))
        else:
            devices = list(config.devices)
        if config.nproc is None:
            return devices
        if config.device_type == "cuda" and config.nproc > len(devices):
            raise ConfigError(f"--nproc {config.nproc}: DDP needs one distinct GPU per process, but --devices "
                              f"names {len(devices)}; lower --nproc or list more GPUs")
        if config.device_type == "cpu":
            return (devices * config.nproc)[: config.nproc]
        return devices[: config.nproc]

    @classmethod
    def world_size(cls, config: TrainConfig) -> int:
        return len(cls.devices_needed(config))

    @classmethod
    def needs_process_group(cls, config: TrainConfig) -> bool:
        return True  # DDP needs its process group even at world size 1

    def prepare(self, workload: Workload) -> None:
        self._build_on_first_device(workload)
        ids = [self.device.index] if self.device.type == "cuda" else None
        self.ddp = DistributedDataParallel(self.model, device_ids=ids, bucket_cap_mb=self.config.bucket_cap_mb)
        self.optimizer = make_optimizer(self.ddp.parameters(), self.device, self.config)

    def step(self, step: int, batch: tuple[Any, Any]) -> StepResult:
        shard = split_batch(batch, self.world, self.config.global_batch)[self.rank]
        return self._plain_step(self.ddp, shard)

    def state(self) -> dict[str, torch.Tensor]:
        return parameter_state(self.model)
