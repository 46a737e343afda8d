"""``replicated``: gpucomm's data parallel — :class:`gpucomm.parallel.ReplicatedDataParallel`, measured.

The strategy is the library, driven by the comparison's loop: it builds the workload's model on its first
device, wraps it in ``ReplicatedDataParallel`` and calls ``train_step`` once per step.  Everything the row
measures — persistent replicas, bucketed prepared all-reduces overlapped with backward, one optimizer per
replica, optional CUDA-graph replay — is :mod:`gpucomm.parallel`'s (its modules say how and why); this
module only translates the comparison's config and reads the library's timing hooks.

Which Communicator decides the form:

* **one process, several devices** (default): one replica per device, all driven by this process;
* **several processes, one device each** (``--nproc N`` with N devices): a
  :class:`~gpucomm.communicator.ProcessGroupCommunicator` — DDP's layout, our code;
* **the hybrid** (``--nproc N`` with k·N devices): each process drives k replicas; a bucket is summed
  within the process, all-reduced across processes, and copied back.

Host time by phase (``TrainRecord.host_breakdown_ms``) comes from the library's ``host_phase`` hook:
``forward``, ``loss``, ``backward`` (which includes the bucket launches its hooks make, also shown alone as
``all_reduce``), ``optimizer``; with graphs ``load``, ``forward_backward`` (per replica), ``all_reduce``,
``optimizer`` (per replica).

.. note::
   With a repeated device list (``cuda:0,cuda:0``) every replica shares one GPU: the code paths are
   exercised, the speed is meaningless.
"""

from __future__ import annotations

from typing import Any

import torch

from gpucomm.communicator import Communicator, ProcessGroupCommunicator
from gpucomm.parallel import GraphCaptureError, ReplicatedDataParallel
from gpucomm.parallel import graphs as parallel_graphs
from gpucomm.train import graphs
from gpucomm.train.config import TrainConfig
from gpucomm.train.models import Workload
from gpucomm.train.strategies.base import (
    StepResult,
    Strategy,
    autocast,
    make_optimizer,
    parameter_state,
    reset_peak_memory,
)

__all__ = ["ReplicatedStrategy"]


class ReplicatedStrategy(Strategy):
    """``ReplicatedDataParallel`` over this process's devices (and across processes with ``--nproc``).

    Args:
        config: the comparison's config (``graphs``, bucket sizes, threads, optimizer).
        devices: the devices **this process** drives, one replica each.
        rank, world_size: this process among the strategy's processes (1: one process drives all).
        communicator: a Communicator to reduce over; None: this process's devices alone, or (``world_size > 1``)
            a ProcessGroupCommunicator on the default group for the hop between processes.
        threads: run each replica's forward in its own thread (None: ``config.replicated_threads``).
    """

    name = "replicated"

    def __init__(self, config: TrainConfig, devices, *, rank: int = 0, world_size: int = 1,
                 communicator: Communicator | None = None, threads: bool | None = None) -> None:
        super().__init__(config, devices, rank=rank, world_size=world_size)
        if communicator is not None and not isinstance(communicator, Communicator):
            raise TypeError(f"communicator: expected a gpucomm Communicator or None, but got "
                            f"{type(communicator).__name__}; pass e.g. LocalCommunicator(devices)")
        self.graphs = bool(config.graphs)
        threads = config.replicated_threads if threads is None else threads
        self.use_threads = bool(threads) and len(self.devices) > 1 and not self.graphs
        self._given = communicator
        self.model: ReplicatedDataParallel | None = None

    # ----- what it says about itself ----------------------------------------------------------------
    @classmethod
    def world_size(cls, config: TrainConfig) -> int:
        """``--nproc`` processes (default 1: this process drives every device)."""
        return config.nproc or 1

    @classmethod
    def not_applicable(cls, config: TrainConfig) -> str | None:
        if config.graphs and (reason := parallel_graphs.unavailable(config.devices)):
            return reason
        world = cls.world_size(config)
        if world > 1 and config.device_type == "cuda" and len(config.devices) % world == 0:
            shares = [set(cls.rank_devices(config, r, world)) for r in range(world)]
            shared = {d for i, a in enumerate(shares) for b in shares[i + 1:] for d in a & b}
            if shared:
                return (f"NCCL allows one process per GPU, but with --nproc {world} processes would share "
                        f"{', '.join(sorted(map(str, shared)))}; give each process its own GPUs")
        return None

    @classmethod
    def notes(cls, config: TrainConfig) -> list[str]:
        notes = []
        world = cls.world_size(config)
        if world > 1:
            k = len(config.devices) // world
            notes.append(f"{world} processes x {k} replicas each: buckets summed within each process, "
                         f"all-reduced across processes, copied back")
        if config.graphs:
            notes.append("CUDA graphs: forward+backward and optimizer replayed per replica; one all-reduce of each "
                         "replica's flat gradient buffer runs between them (not overlapped with backward)")
        elif not config.replicated_threads:
            notes.append("replicas run one after another (no threads)")
        notes.append("comm = all-reduce GPU time on the first device (overlapped or not)"
                     if config.device_type == "cuda" else "comm = host time inside all-reduce calls")
        return notes

    # ----- prepare ----------------------------------------------------------------------------------
    def prepare(self, workload: Workload) -> None:
        if self.graphs and (reason := parallel_graphs.unavailable(self.devices)):
            raise GraphCaptureError(f"--graphs: {reason}; run without --graphs")
        reset_peak_memory(self.devices)
        self.workload = workload
        self.precision = self.config.resolved_precision(workload.autocast)
        model = workload.build_model().to(self.devices[0])
        self.model = graphs.wrap(model, self.devices, self.config, make_optimizer, communicator=self._communicator(),
                                 threads=self.use_threads, bucket_cap_mb=self.config.bucket_cap_mb,
                                 first_bucket_mb=self.config.first_bucket_mb)
        self.model.host_phase = lambda name: self.host_phase(name)  # looked up per call: a timer may replace it
        self.replicas = self.model.replicas
        if self.graphs:
            graphs.capture_first(self.model, workload,
                                 self._share(workload.batch_fn(self.config.seed, 0, self.config.global_batch)),
                                 autocast(self.devices[0], self.precision))
        self.model.record_comm_time = True  # after the capture: its warm-up all-reduces are no step's

    def _communicator(self) -> Communicator | None:
        given = self._given
        if given is not None:
            if [str(d) for d in given.devices] != [str(d) for d in self.devices]:
                raise ValueError(f"communicator: expected one holding this process's devices "
                                 f"{[str(d) for d in self.devices]}, but it holds {[str(d) for d in given.devices]}; "
                                 f"build it over the same devices")
            return given
        return ProcessGroupCommunicator(device=self.devices[0]) if self.world > 1 else None

    def _share(self, batch: tuple[Any, Any]) -> tuple[Any, Any]:
        """This process's contiguous slice of the global batch (the library splits it over its replicas)."""
        if self.world == 1:
            return tuple(batch)
        per = self.config.global_batch // self.world
        lo, hi = self.rank * per, (self.rank + 1) * per
        return tuple(_slice(part, lo, hi) for part in batch)

    # ----- one step ---------------------------------------------------------------------------------
    def step(self, step: int, batch: tuple[Any, Any]) -> StepResult:
        inputs, targets = self._share(batch)
        with autocast(self.devices[0], self.precision):
            loss = self.model.train_step(inputs, targets, loss_fn=self.workload.loss_fn)
        comm = None
        if self.devices[0].type != "cuda":
            taken = self.model.take_comm_ms()
            comm = sum(taken) if taken else 0.0
        return StepResult(loss=loss, comm_ms=comm)

    def take_comm_ms(self) -> list[float] | None:
        """CUDA: each step's all-reduce GPU time (ms, on the first device) since the last call; call it after
        the devices were synchronised (it reads CUDA events).  CPU: None (in ``StepResult.comm_ms``)."""
        if self.devices[0].type != "cuda" or self.model is None:
            return None
        return self.model.take_comm_ms()

    # ----- results ----------------------------------------------------------------------------------
    def state(self) -> dict[str, torch.Tensor]:
        return parameter_state(self.model.module)

    def invariants(self) -> list[str]:
        """Parameters and buffers in which some replica differs from replica 0 (of rank 0) by one bit or more."""
        return self.model.verify_replicas()

    def teardown(self) -> None:
        if self.model is not None:
            self.model.close()


def _slice(x: Any, lo: int, hi: int) -> Any:
    if isinstance(x, torch.Tensor):
        return x[lo:hi]
    if isinstance(x, tuple | list):
        return type(x)(_slice(v, lo, hi) for v in x)
    return x
