"""Running a strategy that ``needs_process_group`` (ddp; replicated with ``--nproc``; any later one).

Strategy-agnostic: nothing here knows a strategy's name.

* On one machine, :func:`launch_strategy` starts ``nprocs`` processes with :func:`gpucomm.dist.launch`
  (gloo on CPU, NCCL on CUDA); :func:`launch_many` runs several trainings in **one** launch
  (processes cost seconds to start: each imports torch).
* Under ``torchrun``/SLURM the processes exist already: :func:`run_under_launcher` joins the job's
  group with :func:`gpucomm.dist.init` (or uses one that is already there).

Each rank builds the strategy as ``cls(config, cls.rank_devices(config, local_rank, local_world),
rank=rank, world_size=world)`` — its equal share of ``cls.devices_needed(config)`` (one device for
ddp, several for a multi-device-per-process strategy) — runs the common loop on every global batch
(the strategy takes its shard), and after the last step the ranks combine, with one
collective each and outside the timing: the loss history (mean of the ranks' shard losses, i.e. the
global-batch loss) and every rank's peak memory.  Step times are rank 0's.  Rank 0 returns the
result; its parameters travel as ``torch.save`` bytes, because tensors sent through a pipe are
shared-memory handles that die with the sending process.
"""

from __future__ import annotations

import io
import os
from typing import Any

import torch
import torch.distributed as td

from gpucomm.train.config import TrainConfig
from gpucomm.train.loop import RunResult, run_strategy
from gpucomm.train.models import load_workload
from gpucomm.train.strategies import get
from gpucomm.train.strategies.base import Strategy

__all__ = ["launch_many", "launch_strategy", "rank_worker", "run_under_launcher", "state_from_bytes"]


def _sum_across_ranks(values: list[float], device: torch.device) -> list[float]:
    t = torch.tensor(values, dtype=torch.float64, device=device)
    td.all_reduce(t)
    return t.tolist()


def _gather_strings(value: str) -> list[str]:
    out: list[Any] = [None] * td.get_world_size()
    td.all_gather_object(out, value)
    return [str(v) for v in out]


def _state_to_bytes(state: dict[str, torch.Tensor]) -> bytes:
    buffer = io.BytesIO()
    torch.save(state, buffer)
    return buffer.getvalue()


def state_from_bytes(data: bytes) -> dict[str, torch.Tensor]:
    """The parameters a rank sent as bytes, as CPU tensors."""
    return torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)


def _build(cls: type[Strategy], config: TrainConfig, rank: int, world: int) -> Strategy:
    """This rank's strategy on its share of the devices (by local rank: under torchrun, per node)."""
    import gpucomm.dist as gd

    env = gd.read_env()
    local_rank, local_world = (env.local_rank, env.local_world_size) if env.source != "none" else (rank, world)
    devices = cls.rank_devices(config, local_rank, local_world)
    return cls(config, devices, rank=rank, world_size=world)


def rank_worker(name: str, config: TrainConfig) -> RunResult | None:
    """Run strategy ``name`` on this rank (the process group exists); rank 0 returns the result.

    Rank 0's ``RunResult.state`` is bytes (see :func:`state_from_bytes`).
    """
    import gpucomm.dist as gd

    rank, world = td.get_rank(), td.get_world_size()
    device = gd.device()
    if device.type == "cpu" and "OMP_NUM_THREADS" not in os.environ:
        # As torchrun does: processes sharing the cores must not each start a thread per core.
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // world))
    workload = load_workload(config.model, seed=config.seed, seq_len=config.seq_len)
    strategy = _build(get(name), config, rank, world)
    result = run_strategy(strategy, workload, config, world_size=world)
    result.losses = [v / world for v in _sum_across_ranks(result.losses, device)]
    if result.peak_mem_bytes:  # every rank's devices, in rank order
        gathered = _gather_strings(",".join(map(str, result.peak_mem_bytes)))
        result.peak_mem_bytes = [int(v) for joined in gathered for v in joined.split(",")]
    result.devices = [d for joined in _gather_strings(",".join(map(str, strategy.devices)))
                      for d in joined.split(",")]
    if rank != 0:
        return None
    result.state = _state_to_bytes(result.state)  # type: ignore[assignment]
    return result


def _many(jobs: list[tuple[str, TrainConfig]]) -> list[RunResult | None]:
    return [rank_worker(name, config) for name, config in jobs]


def launch_many(jobs: list[tuple[str, TrainConfig]], nprocs: int) -> list[RunResult]:
    """Run several ``(strategy name, config)`` trainings one after another in one local launch.

    All configs must use one device type (the launch has one backend).
    """
    from gpucomm.dist import backend_for, launch

    types = {config.device_type for _, config in jobs}
    if len(types) != 1:
        raise ValueError(f"launch_many: jobs must share one device type, but got {sorted(types)}")
    backend = backend_for(types.pop())
    timeout = max(config.timeout for _, config in jobs)
    results = launch(_many, nprocs, list(jobs), backend=backend, timeout=timeout)[0]
    for r in results:
        r.state = state_from_bytes(r.state)
    return results


def launch_strategy(name: str, config: TrainConfig, nprocs: int) -> RunResult:
    """Start ``nprocs`` local processes, train strategy ``name`` and return rank 0's result."""
    return launch_many([(name, config)], nprocs)[0]


def run_under_launcher(name: str, config: TrainConfig) -> RunResult | None:
    """Join the job torchrun/SLURM started (or use the group already there) and train ``name``.

    Rank 0 returns the result (with its parameters as tensors); the other ranks return None.
    """
    import gpucomm.dist as gd

    if gd.is_initialized():
        result = rank_worker(name, config)
    else:
        with gd.init(timeout=config.timeout):
            result = rank_worker(name, config)
    if result is not None:
        result.state = state_from_bytes(result.state)
    return result
