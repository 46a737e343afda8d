"""``ddp``: ``torch.nn.parallel.DistributedDataParallel``, one process per device.

On one machine the processes are started by :func:`gpucomm.dist.launch` (gloo on CPU, NCCL on CUDA,
rank ``r`` on ``cuda:r``); under ``torchrun``/SLURM (``RANK``/``WORLD_SIZE`` set) the processes already
exist and :func:`run_under_launcher` joins the group with :func:`gpucomm.dist.init`.

Each rank takes shard ``rank`` of the same global batch (split in order), so rank shards are exactly
the shards ``replicated`` gives its devices.  DDP averages gradients (sum / world size), so the
gradient is that of the global-batch mean, as in ``single``.  The loss a step reports is the mean of
the ranks' shard losses (one all-reduce of the whole loss history after the last step, outside the
timing); step times are rank 0's.
"""

from __future__ import annotations

import io
import os
from typing import TYPE_CHECKING, Any

import torch
import torch.distributed as td
from torch.nn.parallel import DistributedDataParallel

from gpucomm.train.config import TrainConfig
from gpucomm.train.models import Workload, load_workload
from gpucomm.train.strategies.base import (
    StepResult,
    Strategy,
    autocast,
    call_model,
    make_optimizer,
    parameter_state,
    reset_peak_memory,
    split_batch,
    to_device,
)
from gpucomm.train.strategies.losses import scalar_loss

if TYPE_CHECKING:  # loop imports the strategies package; import it lazily at run time
    from gpucomm.train.loop import RunResult

__all__ = ["DDPStrategy", "ddp_worker", "launch_ddp", "launch_ddp_many", "run_under_launcher"]


class DDPStrategy(Strategy):
    """DDP on this rank's device; ``bucket_cap_mb`` from the config (DDP's default 25 MiB)."""

    name = "ddp"
    per_process = True

    def __init__(self, config: TrainConfig, devices, *, rank: int = 0, world_size: int = 1) -> None:
        super().__init__(config, devices)
        self.rank, self.world_size = rank, world_size

    def prepare(self, workload: Workload) -> None:
        self.device = self.devices[0]
        reset_peak_memory(self.devices)
        self.workload = workload
        self.precision = self.config.resolved_precision(workload.autocast)
        self.model = workload.build_model().to(self.device)
        ids = [self.device.index] if self.device.type == "cuda" else None
        self.ddp = DistributedDataParallel(self.model, device_ids=ids, bucket_cap_mb=self.config.bucket_cap_mb)
        self.optimizer = make_optimizer(self.ddp.parameters(), self.device, self.config)

    def step(self, step: int, batch: tuple[Any, Any]) -> StepResult:
        shard = split_batch(batch, self.world_size, self.config.global_batch)[self.rank]
        inputs, targets = (to_device(x, self.device) for x in shard)
        with autocast(self.device, self.precision):
            loss = scalar_loss(self.workload.loss_fn(call_model(self.ddp, inputs), targets))
        loss.backward()
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return StepResult(loss=loss.item())

    def state(self) -> dict[str, torch.Tensor]:
        return parameter_state(self.model)


def _this_device() -> torch.device:
    import gpucomm.dist as gd

    return gd.device()


def _sum_across_ranks(values: list[float], device: torch.device) -> list[float]:
    t = torch.tensor(values, dtype=torch.float64, device=device)
    td.all_reduce(t)
    return t.tolist()


def _gather_strings(value: str) -> list[str]:
    out: list[Any] = [None] * td.get_world_size()
    td.all_gather_object(out, value)
    return [str(v) for v in out]


def ddp_worker(config: TrainConfig) -> RunResult | None:
    """Run DDP on this rank (the process group exists); rank 0 returns the result, others None.

    The whole-run loss history and each rank's peak memory are combined with one collective each,
    after the last timed step.
    """
    from gpucomm.train.loop import run_strategy

    rank, world = td.get_rank(), td.get_world_size()
    device = _this_device()
    if device.type == "cpu" and "OMP_NUM_THREADS" not in os.environ:
        # As torchrun does: processes sharing the cores must not each start a thread per core.
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // world))
    workload = load_workload(config.model, seed=config.seed, seq_len=config.seq_len)
    result = run_strategy(DDPStrategy(config, [device], rank=rank, world_size=world), workload, config,
                          world_size=world)
    result.losses = [v / world for v in _sum_across_ranks(result.losses, device)]
    if result.peak_mem_bytes:
        slots = [0.0] * world
        slots[rank] = float(result.peak_mem_bytes[0])
        result.peak_mem_bytes = [int(v) for v in _sum_across_ranks(slots, device)]
    result.devices = _gather_strings(str(device))
    if rank != 0:
        return None
    result.state = _to_bytes(result.state)  # type: ignore[assignment]
    return result


def _to_bytes(state: dict[str, torch.Tensor]) -> bytes:
    # Tensors sent through a pipe travel as shared-memory handles that die with the sending process
    # (which exits right after); bytes travel by value.
    buffer = io.BytesIO()
    torch.save(state, buffer)
    return buffer.getvalue()


def _from_bytes(data: bytes) -> dict[str, torch.Tensor]:
    return torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)


def _ddp_worker_many(configs: list[TrainConfig]) -> list[RunResult | None]:
    return [ddp_worker(c) for c in configs]


def launch_ddp_many(configs: list[TrainConfig], nprocs: int) -> list[RunResult]:
    """Run several DDP trainings one after another in *one* launch of ``nprocs`` local processes.

    Starting processes costs seconds (each imports torch); a test or a sweep that needs several DDP
    runs pays it once.  All configs must use one device type.
    """
    from gpucomm.dist import launch

    types = {c.device_type for c in configs}
    if len(types) != 1:
        raise ValueError(f"launch_ddp_many: configs must share one device type, but got {sorted(types)}")
    backend = "nccl" if types == {"cuda"} else "gloo"
    results = launch(_ddp_worker_many, nprocs, list(configs), backend=backend)[0]
    for r in results:
        r.state = _from_bytes(r.state)
    return results


def launch_ddp(config: TrainConfig, nprocs: int) -> RunResult:
    """Start ``nprocs`` local processes with :func:`gpucomm.dist.launch` and return rank 0's result."""
    return launch_ddp_many([config], nprocs)[0]


def run_under_launcher(config: TrainConfig) -> RunResult | None:
    """Join the process group torchrun/SLURM describes, run DDP, leave; rank 0 gets the result."""
    import gpucomm.dist as gd

    with gd.init():
        result = ddp_worker(config)
    if result is not None:
        result.state = _from_bytes(result.state)
    return result
