"""The training loop every strategy runs through, and what it measures.

One loop for all strategies (and for each DDP rank), so that timing and data are identical:

* step ``s``'s global batch is ``workload.batch_fn(seed, s, global_batch)``, made *before* the timer
  starts (data generation is the same work for every strategy and is not what is compared);
* a step's time runs from just before ``strategy.step`` to the end of ``strategy.synchronize()``
  (every device idle again), measured with ``time.perf_counter``;
* peak memory is ``torch.cuda.max_memory_allocated`` per device, reset in ``prepare``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch

from gpucomm.train.config import TrainConfig
from gpucomm.train.models import Workload
from gpucomm.train.strategies.base import Strategy

__all__ = ["RunResult", "run_strategy"]


@dataclass(kw_only=True, slots=True)
class RunResult:
    """Everything one strategy's run produced (before it becomes a TrainRecord)."""

    strategy: str
    devices: list[str]
    """Device of each participant ("cuda:0", ...); for DDP one per rank."""
    world_size: int
    precision: str
    losses: list[float] = field(default_factory=list)
    step_ms: list[float] = field(default_factory=list)
    comm_ms: list[float] | None = None
    peak_mem_bytes: list[int] = field(default_factory=list)
    params: int | None = None
    state: dict[str, torch.Tensor] = field(default_factory=dict)
    """Final parameters (CPU copies), keyed by name."""
    problems: list[str] = field(default_factory=list)
    """Invariant violations the strategy found in itself (e.g. replicas that differ)."""


def run_strategy(strategy: Strategy, workload: Workload, config: TrainConfig, *,
                 world_size: int = 1, devices: list[torch.device] | None = None) -> RunResult:
    """Prepare ``strategy``, run ``config.steps`` steps, collect results, and always tear down."""
    try:
        strategy.prepare(workload)
        losses, step_ms, comm = [], [], []
        for s in range(config.steps):
            batch = workload.batch_fn(config.seed, s, config.global_batch)
            t0 = time.perf_counter()
            result = strategy.step(s, batch)
            strategy.synchronize()
            step_ms.append((time.perf_counter() - t0) * 1e3)
            losses.append(float(result.loss))
            if result.comm_ms is not None:
                comm.append(result.comm_ms)
        state = strategy.state()
        return RunResult(
            strategy=strategy.name, devices=[str(d) for d in (devices or strategy.devices)],
            world_size=world_size, precision=strategy.precision, losses=losses, step_ms=step_ms,
            comm_ms=comm or None, peak_mem_bytes=strategy.peak_memory(),
            params=sum(t.numel() for t in state.values()), state=state,
            problems=strategy.invariants(),
        )
    finally:
        strategy.teardown()
