"""The strategy interface and the helpers every strategy shares.

A strategy is trained through four methods, the same for every sibling:

* ``prepare(workload)`` — build the model(s) and optimizer(s) on the strategy's devices (once);
* ``step(step, batch) -> StepResult`` — one optimizer step on the *global* batch; returns the loss
  (mean over the global batch, as seen by this process) and communication time where isolated;
* ``state() -> {name: tensor}`` — the trained parameters, as CPU copies, named as the workload's model
  names them (so strategies compare name by name);
* ``teardown()`` — release threads, streams, process groups' users; idempotent;
* ``invariants() -> [str]`` — after training, what the strategy finds wrong with itself (e.g.
  replicas that are not bit-identical); empty when all is well.

``not_applicable(config)`` says, before anything is built, why a strategy cannot run here (e.g. dp on
CPU); the driver then records status "not-applicable" with that reason instead of faking a run.
"""

from __future__ import annotations

import abc
import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from torch import nn

from gpucomm.train.config import TrainConfig
from gpucomm.train.models import Workload
from gpucomm.train.strategies.losses import scalar_loss

__all__ = [
    "StepResult",
    "Strategy",
    "autocast",
    "call_model",
    "make_optimizer",
    "parameter_state",
    "peak_memory",
    "reset_peak_memory",
    "split_batch",
    "synchronize",
    "to_device",
]


@dataclass(kw_only=True, slots=True)
class StepResult:
    """What one step reports."""

    loss: float
    """Loss of the step: the mean over the global batch (for one DDP rank: over its shard)."""
    comm_ms: float | None = None
    """Time spent in communication during the step, where the strategy can isolate it."""


class Strategy(abc.ABC):
    """One way to train a workload; siblings differ only in how they use their devices."""

    name: ClassVar[str]
    """Registry name ("single", "dp", ...)."""
    per_process: ClassVar[bool] = False
    """True when the strategy runs one process per device (:mod:`gpucomm.train.launching` starts
    them); such a class is constructed as ``cls(config, [device], rank=rank, world_size=world)``."""

    def __init__(self, config: TrainConfig, devices: Sequence[torch.device]) -> None:
        self.config = config
        self.devices = list(devices)
        self.precision = "fp32"

    @classmethod
    def not_applicable(cls, config: TrainConfig) -> str | None:
        """Why the strategy cannot run under ``config``, or None when it can."""
        return None

    def _build_on_first_device(self, workload: Workload) -> nn.Module:
        """The prologue ``single``, ``dp`` and ``ddp`` share: the workload's model on ``devices[0]``.

        Resets peak-memory counters, records the workload and the precision it resolves to, and
        returns (and keeps as ``self.model``) a freshly built model on ``self.device``.
        """
        self.device = self.devices[0]
        reset_peak_memory(self.devices)
        self.workload = workload
        self.precision = self.config.resolved_precision(workload.autocast)
        self.model = workload.build_model().to(self.device)
        return self.model

    def _plain_step(self, module: nn.Module, batch: tuple[Any, Any]) -> StepResult:
        """Forward ``batch`` through ``module`` on ``self.device``, backward, one optimizer step.

        The step that ``single``, ``dp`` and ``ddp`` share: they differ only in the module they call
        (the model, its DataParallel wrapper, its DDP wrapper) and in which samples they are given.
        """
        inputs, targets = (to_device(x, self.device) for x in batch)
        with autocast(self.device, self.precision):
            loss = scalar_loss(self.workload.loss_fn(call_model(module, inputs), targets))
        loss.backward()
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return StepResult(loss=loss.item())

    @abc.abstractmethod
    def prepare(self, workload: Workload) -> None:
        """Build model(s) and optimizer(s) on ``self.devices``."""

    @abc.abstractmethod
    def step(self, step: int, batch: tuple[Any, Any]) -> StepResult:
        """One optimizer step on the global ``batch`` (CPU tensors, dim 0 = samples)."""

    @abc.abstractmethod
    def state(self) -> dict[str, torch.Tensor]:
        """The parameters as CPU copies, keyed by the workload model's parameter names."""

    def teardown(self) -> None:
        """Release what ``prepare`` made; safe to call twice."""
        return None

    def invariants(self) -> list[str]:
        """Violations of the strategy's own invariants after training (e.g. replicas that differ); [] = none."""
        return []

    def peak_memory(self) -> list[int]:
        """Peak allocated bytes per device since ``prepare`` (CUDA), else empty."""
        return peak_memory(self.devices)

    def synchronize(self) -> None:
        """Wait until every device's queued work is done (step timing ends here)."""
        synchronize(self.devices)


def synchronize(devices: Sequence[torch.device]) -> None:
    """``torch.cuda.synchronize`` on each distinct CUDA device; nothing on CPU."""
    for d in dict.fromkeys(devices):
        if d.type == "cuda":
            torch.cuda.synchronize(d)


def reset_peak_memory(devices: Sequence[torch.device]) -> None:
    """Start peak-memory accounting afresh on each CUDA device."""
    for d in dict.fromkeys(devices):
        if d.type == "cuda":
            torch.cuda.reset_peak_memory_stats(d)


def peak_memory(devices: Sequence[torch.device]) -> list[int]:
    """``max_memory_allocated`` per listed device (a repeated device repeats its figure); [] on CPU."""
    if not devices or devices[0].type != "cuda":
        return []
    return [int(torch.cuda.max_memory_allocated(d)) for d in devices]


def make_optimizer(params: Any, device: torch.device, config: TrainConfig) -> torch.optim.Optimizer:
    """``config.optimizer``: AdamW (fused on CUDA: one kernel for all parameters; foreach on CPU) or SGD."""
    lr = config.lr
    if config.optimizer == "sgd":
        return torch.optim.SGD(params, lr=lr)
    if device.type == "cuda":
        return torch.optim.AdamW(params, lr=lr, fused=True)
    return torch.optim.AdamW(params, lr=lr)


def autocast(device: torch.device, precision: str) -> contextlib.AbstractContextManager:
    """bf16 autocast for "bf16-autocast" on CUDA; a no-op context otherwise."""
    if precision == "bf16-autocast" and device.type == "cuda":
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()


def to_device(x: Any, device: torch.device) -> Any:
    """Move a tensor, or a tuple/list of tensors, to ``device`` (non-blocking from pinned memory)."""
    if isinstance(x, torch.Tensor):
        return x.to(device, non_blocking=True)
    if isinstance(x, tuple | list):
        return type(x)(to_device(v, device) for v in x)
    return x


def _batch_size(x: Any) -> int | None:
    if isinstance(x, torch.Tensor):
        return x.shape[0] if x.dim() else None
    if isinstance(x, tuple | list):
        sizes = {_batch_size(v) for v in x} - {None}
        return sizes.pop() if len(sizes) == 1 else None
    return None


def _split(x: Any, n: int) -> list[Any]:
    if isinstance(x, torch.Tensor):
        return list(x.split(x.shape[0] // n))
    if isinstance(x, tuple | list):
        parts = [_split(v, n) for v in x]
        return [type(x)(p[i] for p in parts) for i in range(n)]
    return [x] * n


def split_batch(batch: tuple[Any, Any], n: int, global_batch: int) -> list[tuple[Any, Any]]:
    """Split ``(inputs, targets)`` in order along dim 0 into ``n`` equal shards.

    Raises:
        ValueError: a tensor's dim 0 is not ``global_batch``, or it does not divide by ``n``.
    """
    if not isinstance(batch, tuple | list) or len(batch) != 2:
        raise ValueError(f"batch_fn: expected (inputs, targets), but got {type(batch).__name__}")
    for what, part in zip(("inputs", "targets"), batch, strict=True):
        size = _batch_size(part)
        if size != global_batch:
            raise ValueError(f"batch_fn: {what} must have dim 0 = global batch {global_batch}, but got {size}")
    if global_batch % n:
        raise ValueError(f"global batch {global_batch} does not divide by {n} devices")
    inputs, targets = (_split(part, n) for part in batch)
    return list(zip(inputs, targets, strict=True))


def call_model(model: nn.Module, inputs: Any) -> Any:
    """``model(*inputs)`` for a tuple/list of inputs, ``model(inputs)`` for one tensor."""
    return model(*inputs) if isinstance(inputs, tuple | list) else model(inputs)


def parameter_state(model: nn.Module) -> dict[str, torch.Tensor]:
    """``{name: CPU copy}`` of every (deduplicated) parameter of ``model``."""
    return {name: p.detach().to("cpu", copy=True) for name, p in model.named_parameters()}


@contextlib.contextmanager
def device_context(device: torch.device) -> Iterator[None]:
    """Make ``device`` the current CUDA device inside the block (no-op on CPU)."""
    if device.type == "cuda":
        with torch.cuda.device(device):
            yield
    else:
        yield
