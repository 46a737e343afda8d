"""``dp``: ``torch.nn.DataParallel`` exactly as users run it.

The model lives on ``devices[0]``; every forward replicates it onto all devices, scatters the batch,
runs the replicas in threads and gathers the outputs back to ``devices[0]``, where the loss is
computed on the full batch (so it is the global-batch mean by construction).  Backward reduces the
replicas' gradients onto ``devices[0]``, and one optimizer steps there.

Autocast state is thread-local and DataParallel's worker threads re-enter autocast with the default
dtype (float16), not the caller's bf16; torch's AMP notes prescribe autocast *inside* the model's
forward for DataParallel, which is what :class:`_AutocastForward` does.

Host cost by phase: :class:`_PhasedDataParallel` is ``nn.DataParallel`` with each of its four forward
phases — ``scatter`` (the inputs), ``replicate`` (the model, every step), ``parallel_apply`` (the
replicas' forwards, in threads) and ``gather`` (the outputs) — wrapped in the strategy's
:meth:`~gpucomm.train.strategies.base.Strategy.host_phase`; ``backward`` and ``optimizer`` come from
the shared step.  The phases call DataParallel's own methods unchanged: what is measured is what
users run.

DataParallel is CUDA-only: on CPU devices it is reported "not-applicable", never emulated.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from gpucomm.train.config import TrainConfig
from gpucomm.train.models import Workload
from gpucomm.train.strategies.base import (
    StepResult,
    Strategy,
    autocast,
    make_optimizer,
    parameter_state,
)

__all__ = ["DataParallelStrategy"]


class _AutocastForward(nn.Module):
    """Run ``module``'s forward under bf16 autocast in whichever thread calls it."""

    def __init__(self, module: nn.Module, precision: str) -> None:
        super().__init__()
        self.module = module
        self.precision = precision

    def forward(self, *args: Any) -> Any:
        with autocast(torch.device("cuda"), self.precision):  # dp is CUDA-only
            return self.module(*args)


class _PhasedDataParallel(nn.DataParallel):
    """``nn.DataParallel`` whose scatter, replicate, parallel_apply and gather report host time by phase."""

    def __init__(self, module: nn.Module, phase: Any, **kwargs: Any) -> None:
        super().__init__(module, **kwargs)
        self._phase = phase  # the owning strategy's host_phase

    def scatter(self, *args: Any, **kwargs: Any) -> Any:
        with self._phase("scatter"):
            return super().scatter(*args, **kwargs)

    def replicate(self, *args: Any, **kwargs: Any) -> Any:
        with self._phase("replicate"):
            return super().replicate(*args, **kwargs)

    def parallel_apply(self, *args: Any, **kwargs: Any) -> Any:
        with self._phase("parallel_apply"):
            return super().parallel_apply(*args, **kwargs)

    def gather(self, *args: Any, **kwargs: Any) -> Any:
        with self._phase("gather"):
            return super().gather(*args, **kwargs)


class DataParallelStrategy(Strategy):
    """``nn.DataParallel(model, device_ids=devices, output_device=devices[0])``."""

    name = "dp"

    @classmethod
    def not_applicable(cls, config: TrainConfig) -> str | None:
        if config.device_type != "cuda":
            return "torch.nn.DataParallel runs only on CUDA devices (it is not emulated on CPU)"
        return None

    def prepare(self, workload: Workload) -> None:
        self._build_on_first_device(workload)
        ids = [d.index for d in self.devices]
        self.dp = _PhasedDataParallel(_AutocastForward(self.model, self.precision), self.host_phase,
                                      device_ids=ids, output_device=self.device.index)
        self.optimizer = make_optimizer(self.model.parameters(), self.device, self.config)

    def step(self, step: int, batch: tuple[Any, Any]) -> StepResult:
        # As users write it: the batch goes to devices[0]; DataParallel scatters it from there.
        return self._plain_step(self.dp, batch, forward_phase=None)

    def state(self) -> dict[str, torch.Tensor]:
        return parameter_state(self.model)
