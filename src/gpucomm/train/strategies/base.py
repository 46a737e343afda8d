"""The strategy interface and the helpers every strategy shares.

A strategy is trained through these methods, the same for every sibling:

* ``prepare(workload)`` — build the model(s) and optimizer(s) on the strategy's devices (once);
* ``step(step, batch) -> StepResult`` — one optimizer step on the *global* batch; returns the loss
  (mean over the global batch, as seen by this process) **as a device tensor**: the loop reads it
  only after the timed window, so a step never waits for the device;
* ``state() -> {name: tensor}`` — the trained parameters, as CPU copies, named as the workload's model
  names them (so strategies compare name by name);
* ``teardown()`` — release threads, streams, process groups' users; idempotent;
* ``invariants() -> [str]`` — after training, what the strategy finds wrong with itself (e.g.
  replicas that are not bit-identical); empty when all is well.

What a strategy says about itself before anything is built (class methods of ``config``; the CLI
asks them **once** and nobody else dispatches on strategy names):

* ``devices_needed(config)`` — every device it trains on, over all its processes;
* ``world_size(config)`` — how many processes it runs in (1: in the calling process);
* ``needs_process_group(config)`` — whether it must run under torch.distributed even at world size 1
  (ddp); such a strategy is started with :func:`gpucomm.dist.launch` (or joins torchrun's job) and each
  rank is built as ``cls(config, cls.rank_devices(config, rank, world), rank=rank, world_size=world)``;
* ``rank_devices(config, rank, world)`` — rank ``rank``'s share of ``devices_needed`` (an equal slice);
* ``notes(config)`` — what a reader of its row must know (e.g. "replicas run one after another");
* ``not_applicable(config)`` — why it cannot run here (e.g. dp on CPU), or None; the driver then
  records status "not-applicable" with that reason instead of faking a run.

Host cost by phase: inside ``step`` a strategy may wrap parts of its work in
``with self.host_phase("replicate"): ...``; the host seconds of each phase accumulate (thread-safely:
replica threads may report at once) until the loop takes them with :meth:`Strategy.take_host_phases`
after each step.  The loop itself measures the host time of the whole ``step()`` call; phases say
where it went (``TrainRecord.host_breakdown_ms``).  A phase timer is two ``perf_counter`` reads: it
adds no sync, copy or allocation on the device.
"""

from __future__ import annotations

import abc
import contextlib
import threading
import time
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
    "pin",
    "reset_peak_memory",
    "split_batch",
    "synchronize",
    "to_device",
]


@dataclass(kw_only=True, slots=True)
class StepResult:
    """What one step reports."""

    loss: torch.Tensor | float
    """Loss of the step: the mean over the global batch (for one DDP rank: over its shard).  A detached
    0-dim tensor, left on the device: the loop converts it to a float after the timed window, so that
    reading it does not make the host wait for the step (``float(t)`` is a sync).  A float is accepted."""
    comm_ms: float | None = None
    """Time spent in communication during the step, where the strategy can isolate it."""


class Strategy(abc.ABC):
    """One way to train a workload; siblings differ only in how they use their devices."""

    name: ClassVar[str]
    """Registry name ("single", "dp", ...)."""

    def __init__(self, config: TrainConfig, devices: Sequence[torch.device], *, rank: int = 0,
                 world_size: int = 1) -> None:
        self.config = config
        self.devices = list(devices)
        """The devices **this process** drives (``host_ms_per_device`` divides by their count)."""
        self.rank = rank
        """This process's rank among the strategy's processes (0 when it runs in one process)."""
        self.world = world_size
        """The strategy's process count in this run (the class method ``world_size(config)`` says it up front)."""
        self.precision = "fp32"
        self.graphs = False
        """Set True by a strategy whose steps replay CUDA graphs (``config.graphs``); lands in the record as ``TrainRecord.graphs``."""
        self._phases: dict[str, float] = {}
        self._phase_lock = threading.Lock()

    # ----- what the strategy says about itself, before anything is built ----------------------------
    @classmethod
    def devices_needed(cls, config: TrainConfig) -> list[torch.device]:
        """Every device the strategy trains on, over all its processes (default: all of ``--devices``).

        A one-device strategy (``single``) returns ``config.devices[:1]``; ddp one device per rank.
        The global batch must divide by ``len(devices_needed(config))``.
        """
        return list(config.devices)

    @classmethod
    def world_size(cls, config: TrainConfig) -> int:
        """Processes the strategy runs in (default 1: the calling process drives every device)."""
        return 1

    @classmethod
    def needs_process_group(cls, config: TrainConfig) -> bool:
        """Whether it runs under torch.distributed (launched, or in torchrun's job); default: world size > 1."""
        return cls.world_size(config) > 1

    @classmethod
    def rank_devices(cls, config: TrainConfig, rank: int, world: int) -> list[torch.device]:
        """Rank ``rank``'s devices: slice ``rank`` of ``devices_needed(config)`` cut into ``world`` equal slices.

        Raises:
            ValueError: the devices do not split evenly over ``world`` ranks.
        """
        devices = cls.devices_needed(config)
        if world < 1 or len(devices) % world:
            raise ValueError(f"{cls.name}: {len(devices)} devices do not split evenly over {world} processes; "
                             f"list a multiple of {world} devices or change --nproc")
        k = len(devices) // world
        return devices[rank * k:(rank + 1) * k]

    @classmethod
    def notes(cls, config: TrainConfig) -> list[str]:
        """What a reader of this strategy's row must know under ``config`` (shown with the row)."""
        return []

    @classmethod
    def not_applicable(cls, config: TrainConfig) -> str | None:
        """Why the strategy cannot run under ``config``, or None when it can."""
        return None

    # ----- host cost by phase ---------------------------------------------------------------------
    @contextlib.contextmanager
    def host_phase(self, phase: str) -> Iterator[None]:
        """Add the host time spent inside the block to ``phase`` for the current step.

        Host time only (``time.perf_counter``): on CUDA the block's kernels are enqueued, not awaited,
        so this is the Python and launch cost of the phase.  Safe to use from several threads (their
        times add up, so a phase run by n replica threads reports the sum of their host times).
        """
        t0 = time.perf_counter()
        try:
            yield
        finally:
            dt = time.perf_counter() - t0
            with self._phase_lock:
                self._phases[phase] = self._phases.get(phase, 0.0) + dt

    def take_host_phases(self) -> dict[str, float]:
        """The host seconds per phase accumulated since the last call, and reset (the loop calls it per step)."""
        with self._phase_lock:
            phases, self._phases = self._phases, {}
        return phases

    def take_comm_ms(self) -> list[float] | None:
        """Each step's communication time (ms), one per step since ``prepare``, read after the loop's final
        synchronize — for strategies whose comm time lives in CUDA events that cannot be read inside a step
        without waiting for the GPU.  ``None`` (the default) when the strategy reports it per step in
        ``StepResult.comm_ms`` instead."""
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

    def _plain_step(self, module: nn.Module, batch: tuple[Any, Any], *, forward_phase: str | None = "forward"
                    ) -> StepResult:
        """Forward ``batch`` through ``module`` on ``self.device``, backward, one optimizer step.

        The step that ``single``, ``dp`` and ``ddp`` share: they differ only in the module they call
        (the model, its DataParallel wrapper, its DDP wrapper) and in which samples they are given.
        Host phases "forward" (unless ``forward_phase`` is None: dp reports its own sub-phases),
        "backward" and "optimizer".  The loss stays on the device (see :class:`StepResult`).
        """
        inputs, targets = (to_device(x, self.device) for x in batch)
        with self.host_phase(forward_phase) if forward_phase else contextlib.nullcontext():
            with autocast(self.device, self.precision):
                loss = scalar_loss(self.workload.loss_fn(call_model(module, inputs), targets))
        with self.host_phase("backward"):
            loss.backward()
        with self.host_phase("optimizer"):
            self.optimizer.step()
            self.optimizer.zero_grad(set_to_none=True)
        return StepResult(loss=loss.detach())

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
    """Start peak-memory accounting afresh on each CUDA device.

    CUDA is initialised first: before its lazy initialisation the caching allocator knows no device, and
    ``reset_peak_memory_stats`` fails with "Invalid device argument" (seen on torch 2.11 when ``single`` is
    the first thing a process runs on the GPU).
    """
    cuda = [d for d in dict.fromkeys(devices) if d.type == "cuda"]
    if cuda:
        torch.cuda.init()
    for d in cuda:
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


def pin(x: Any) -> Any:
    """Page-locked copies of a tensor, or a tuple/list of tensors, so that ``to_device`` copies them asynchronously.

    A copy from pageable memory makes the host wait for the stream (CUDA stages it through a bounce
    buffer); from pinned memory ``non_blocking=True`` only enqueues it.  The loop pins every step's
    batch before the timed window, as a ``DataLoader(pin_memory=True)`` does for a user's loop.
    Leaves ``x`` as it is when CUDA is not available (there is nothing to pin for).
    """
    if isinstance(x, torch.Tensor):
        return x.pin_memory() if x.device.type == "cpu" and torch.cuda.is_available() else x
    if isinstance(x, tuple | list):
        return type(x)(pin(v) for v in x)
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
