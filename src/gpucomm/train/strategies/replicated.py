"""``replicated``: our data parallel — persistent replicas, bucketed all-reduce in backward — on a Communicator.

The strategy is written once against :class:`gpucomm.communicator.Communicator`; which one it gets
decides the form:

* **one process, several devices** (default): a :class:`~gpucomm.communicator.LocalCommunicator` over
  ``devices`` — one replica per device, all driven by this process;
* **several processes, one device each** (``--nproc N`` with N devices): a
  :class:`~gpucomm.communicator.ProcessGroupCommunicator` — DDP's layout, our code;
* **the hybrid** (``--nproc N`` with k·N devices): each process drives k replicas.  A bucket is summed
  within the process (LocalCommunicator ``reduce`` onto replica 0), across processes
  (ProcessGroupCommunicator ``all_reduce`` of replica 0's bucket), and copied back to the others
  (``broadcast``): the hierarchical all-reduce, with one inter-process message per bucket per process.

What it does differently from DataParallel, and why:

* **Replicas are made once** (in ``prepare``), one per device, each with its own optimizer; DataParallel
  re-broadcasts the model on every forward.
* **Gradients are averaged by all-reduce**, in buckets formed as DDP forms them (reverse parameter
  order, a 1 MiB first bucket, then 25 MiB; see :mod:`gpucomm.train._buckets`).  Each replica's
  gradients *are* views into its flat bucket buffers (DDP's ``gradient_as_bucket_view``), so a bucket
  is reduced in place with no copy.  Every bucket's collective is **prepared** once
  (``Communicator.prepare``: checked once, then rerun on the same buffers with no per-call checks).
* **Communication overlaps backward** (eager): a ``register_post_accumulate_grad_hook`` on every
  replica parameter counts ready gradients; buckets are launched **in bucket order** as soon as they
  are ready on every replica of this process (the order matters: every process and every device must
  see the collectives in the same sequence, as DDP ensures), on a communication stream per device that
  first waits for the compute stream.
* **Every replica steps its own optimizer** on identical averaged gradients, so no parameter broadcast
  is needed: the replicas stay bit-identical (:meth:`ReplicatedStrategy.invariants` checks it, across
  processes too).  The sum is divided by the participant count on each replica with the same kernel
  on the same input, so the averages are identical too.
* **One Python thread per device** runs forward and backward (eager; like DataParallel's
  ``parallel_apply``, but the threads are a persistent pool).  Autocast is thread-local, so each
  thread enters it itself.
* **CUDA graphs** (``--graphs``): each replica's forward+backward and its optimizer step are replayed
  from graphs and the prepared all-reduce runs between them (:mod:`gpucomm.train.graphs` says why);
  the host then spends a few launches per replica-step instead of one per kernel.  With graphs the
  gradients are **one flat buffer per dtype** per replica (one "bucket" holding every parameter, the
  ``.grad`` views set before capture), so the step issues ONE prepared all-reduce, not one per 25 MiB
  bucket: the all-reduce cannot overlap backward in graph mode, so buckets would only multiply launches
  (on the H200 with 4 replicas, ~20 buckets' eager reduce kernels cost 6 ms of host per replica-step).

Host time by phase (``TrainRecord.host_breakdown_ms``): ``forward`` and ``backward`` per replica
(summed over replicas; ``backward`` includes the bucket launches its hooks make, which are also shown
alone as ``all_reduce``), ``optimizer``; with graphs ``load`` (copying the shards into the static
buffers), ``forward_backward`` (graph replays), ``all_reduce`` and ``optimizer`` (graph replays).

.. note::
   With a repeated device list (``cuda:0,cuda:0``) every replica shares one GPU: the code paths are
   exercised, the speed is meaningless.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any

import torch
from torch import nn

from gpucomm.communicator import Communicator, LocalCommunicator, ProcessGroupCommunicator
from gpucomm.train import graphs
from gpucomm.train._buckets import MiB, plan_buckets
from gpucomm.train.config import TrainConfig
from gpucomm.train.models import Workload
from gpucomm.train.strategies.base import (
    StepResult,
    Strategy,
    autocast,
    call_model,
    device_context,
    make_optimizer,
    parameter_state,
    reset_peak_memory,
    split_batch,
    to_device,
)
from gpucomm.train.strategies.losses import scalar_loss

__all__ = ["ReplicatedStrategy"]


def _prepared(comm: Communicator, method: str, tensors: list[torch.Tensor], *args: Any) -> Callable[[], Any]:
    """``comm.prepare(method, tensors, *args)``: the collective checked once, rerun by calling it.

    Arguments are passed by position: ``op`` is both prepare's first parameter and all_reduce's.
    """
    return comm.prepare(method, tensors, *args)


def _loss_of(loss_fn: Callable[[Any, Any], torch.Tensor], model: nn.Module, inputs: Any, targets: Any
             ) -> torch.Tensor:
    return scalar_loss(loss_fn(call_model(model, inputs), targets))


class ReplicatedStrategy(Strategy):
    """Persistent replicas on every device; bucketed, overlapped, prepared all-reduce of gradients.

    Args:
        config: the comparison's config (``graphs``, bucket sizes, threads, optimizer).
        devices: the devices **this process** drives, one replica each.
        rank, world_size: this process among the strategy's processes (1: one process drives all).
        communicator: the Communicator to reduce over; it must hold exactly ``devices``.  None: a
            LocalCommunicator over ``devices``, plus (``world_size > 1``) a ProcessGroupCommunicator on
            the default group for the hop between processes.
        threads: run each replica's forward/backward in its own thread (None: ``config.replicated_threads``;
            never with graphs, whose replays cost microseconds).
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
        self._pool: ThreadPoolExecutor | None = None
        self._hooks: list[Any] = []
        self._step_graphs: graphs.StepGraphs | None = None
        self._comm_events: list[list[tuple[Any, Any]]] = []

    # ----- what it says about itself ----------------------------------------------------------------
    @classmethod
    def world_size(cls, config: TrainConfig) -> int:
        """``--nproc`` processes (default 1: this process drives every device)."""
        return config.nproc or 1

    @classmethod
    def not_applicable(cls, config: TrainConfig) -> str | None:
        if config.graphs and (reason := graphs.unavailable(config.devices)):
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
        reset_peak_memory(self.devices)
        self.workload = workload
        self.precision = self.config.resolved_precision(workload.autocast)
        self._local, self._group = self._communicators()
        self._n_total = (self._local.n if self._local else 1) * (self._group.n if self._group else 1)
        self.replicas: list[nn.Module] = [workload.build_model().to(d) for d in self.devices]
        params0 = list(self.replicas[0].parameters())
        if self.graphs:
            # Graph mode: the all-reduce runs after the whole backward anyway (between the captured segments),
            # so buckets buy no overlap; one flat buffer per dtype makes it ONE prepared collective per step
            # (the bucket cap exceeds the model; plan_buckets still closes a bucket where the dtype changes).
            whole = sum(p.numel() * p.element_size() for p in params0) + 1
            self.buckets = plan_buckets(params0, whole, whole)
        else:
            self.buckets = plan_buckets(params0, int(self.config.bucket_cap_mb * MiB),
                                        int(self.config.first_bucket_mb * MiB))
        self._buffers = [self._bucket_buffers(m) for m in self.replicas]
        self._reducers = [self._bucket_reducer(b) for b in range(len(self.buckets))]
        self._streams()
        self._lock = threading.Lock()
        if self.graphs:
            self._prepare_graphs(workload)
            return
        self.optimizers = [make_optimizer(m.parameters(), d, self.config)
                           for m, d in zip(self.replicas, self.devices, strict=True)]
        for r, model in enumerate(self.replicas):
            self._register_hooks(r, list(model.parameters()))
        if self.use_threads:
            self._pool = ThreadPoolExecutor(max_workers=len(self.devices), thread_name_prefix="gpucomm-replica")

    def _communicators(self) -> tuple[Communicator | None, Communicator | None]:
        """(within this process, across processes): either may be None, not both."""
        given = self._given
        if given is not None:
            if [str(d) for d in given.devices] != [str(d) for d in self.devices]:
                raise ValueError(f"communicator: expected one holding this process's devices "
                                 f"{[str(d) for d in self.devices]}, but it holds {[str(d) for d in given.devices]}; "
                                 f"build it over the same devices")
            if given.world_size == 1:
                return given, None
            if len(self.devices) == 1:
                return None, given
            raise ValueError(f"communicator: a process-group communicator holding {len(self.devices)} devices per "
                             f"process is not supported; pass None (the strategy then reduces within the "
                             f"process, then across processes)")
        local = LocalCommunicator(self.devices) if self.world == 1 or len(self.devices) > 1 else None
        group = ProcessGroupCommunicator(device=self.devices[0]) if self.world > 1 else None
        return local, group

    def _bucket_buffers(self, model: nn.Module) -> list[torch.Tensor]:
        """One flat zeroed buffer per bucket; each parameter's ``.grad`` becomes a view into it."""
        params = list(model.parameters())
        buffers = []
        for bucket in self.buckets:
            first = params[bucket[0]]
            flat = torch.zeros(sum(params[i].numel() for i in bucket), dtype=first.dtype, device=first.device)
            offset = 0
            for i in bucket:
                n = params[i].numel()
                params[i].grad = flat[offset:offset + n].view_as(params[i])
                offset += n
            buffers.append(flat)
        return buffers

    def _bucket_reducer(self, bucket: int) -> list[Callable[[], Any]]:
        """The prepared collectives that leave bucket ``bucket`` summed over every participant, on every replica."""
        tensors = [buffers[bucket] for buffers in self._buffers]
        local, group = self._local, self._group
        if group is None:
            return [_prepared(local, "all_reduce", tensors, "sum")]
        if local is None:
            return [_prepared(group, "all_reduce", tensors, "sum")]
        return [_prepared(local, "reduce", tensors, 0, "sum"),  # root 0, op
                _prepared(group, "all_reduce", tensors[:1], "sum"),
                _prepared(local, "broadcast", tensors, 0)]

    def _streams(self) -> None:
        self.distinct = list(dict.fromkeys(self.devices))
        cuda = self.devices[0].type == "cuda"
        self.compute_streams = {d: torch.cuda.current_stream(d) for d in self.distinct} if cuda else {}
        self.comm_streams = {d: torch.cuda.Stream(d) for d in self.distinct} if cuda and not self.graphs else {}

    def _register_hooks(self, replica: int, params: list[nn.Parameter]) -> None:
        for b, bucket in enumerate(self.buckets):
            for i in bucket:
                self._hooks.append(params[i].register_post_accumulate_grad_hook(partial(self._ready, b)))

    def _prepare_graphs(self, workload: Workload) -> None:
        """Capturable optimizers, static buffers, warm-up and capture (:class:`graphs.StepGraphs`)."""
        reason = graphs.unavailable(self.devices)
        if reason:
            raise graphs.GraphCaptureError(f"--graphs: {reason}; run without --graphs")
        self.optimizers = [graphs.capturable_optimizer(m.parameters(), d, self.config.optimizer, self.config.lr)
                           for m, d in zip(self.replicas, self.devices, strict=True)]
        example = self._shards(workload.batch_fn(self.config.seed, 0, self.config.global_batch))
        loss_of = partial(_loss_of, workload.loss_fn)
        steps = [graphs.ReplicaStep(model=m, optimizer=o, loss_of=loss_of, device=d, precision=self.precision,
                                    example=shard, grads=buffers, average=self._n_total)
                 for m, o, d, shard, buffers in zip(self.replicas, self.optimizers, self.devices, example,
                                                    self._buffers, strict=True)]
        self._step_graphs = graphs.StepGraphs(steps, between=self._reduce_all, capture_fn=graphs.capture)
        self._step_graphs.prepare(example)

    # ----- the bucket protocol ----------------------------------------------------------------------
    def _reset_step(self) -> None:
        self._pending = [len(b) * len(self.replicas) for b in self.buckets]
        self._launched = [False] * len(self.buckets)
        self._next = 0
        self._comm_s = 0.0
        if self.compute_streams:
            self._comm_events.append([])

    def _ready(self, bucket: int, _param: torch.Tensor) -> None:
        """Gradient hook: count one ready gradient; launch every bucket that is now ready, in order."""
        with self._lock:
            self._pending[bucket] -= 1
            while self._next < len(self.buckets) and self._pending[self._next] == 0:
                self._launch(self._next)
                self._next += 1

    def _launch(self, bucket: int) -> None:
        """Sum one bucket over every participant, then divide by their count on each: under ``self._lock``."""
        self._launched[bucket] = True
        tensors = [buffers[bucket] for buffers in self._buffers]
        t0 = time.perf_counter()
        with self.host_phase("all_reduce"), self._on_comm_streams():
            for call in self._reducers[bucket]:
                call()
            for t in tensors:
                t.div_(self._n_total)
        self._comm_s += time.perf_counter() - t0

    def _reduce_all(self) -> None:
        """Graph mode, between the captured segments: every bucket's prepared collectives, in order."""
        for reducer in self._reducers:
            for call in reducer:
                call()

    @contextlib.contextmanager
    def _on_comm_streams(self):
        """Make each device's comm stream current (after it waits for compute); bracket it with events."""
        if not self.comm_streams:
            yield
            return
        with contextlib.ExitStack() as stack:
            for d in self.distinct:
                self.comm_streams[d].wait_stream(self.compute_streams[d])
                stack.enter_context(torch.cuda.stream(self.comm_streams[d]))
            with self._timed_on(self.comm_streams[self.distinct[0]]):
                yield

    @contextlib.contextmanager
    def _timed_on(self, stream: Any):
        """Record a start and an end event on ``stream`` around the block (enqueued: no sync)."""
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record(stream)
        yield
        end.record(stream)
        self._comm_events[-1].append((start, end))

    def _finish_comm(self) -> float:
        """Launch buckets no hook completed (unused parameters: zero gradients), then join the streams."""
        with self._lock:
            while self._next < len(self.buckets):
                self._launch(self._next)
                self._next += 1
        for d in self.distinct:
            if self.comm_streams:
                self.compute_streams[d].wait_stream(self.comm_streams[d])
        return self._comm_s

    # ----- one step ---------------------------------------------------------------------------------
    def _shards(self, batch: tuple[Any, Any]) -> list[tuple[Any, Any]]:
        """This process's shards of the global batch: k of the world·k equal shards, in order."""
        k = len(self.devices)
        shards = split_batch(batch, k * self.world, self.config.global_batch)
        return shards[self.rank * k:(self.rank + 1) * k]

    def _forward_backward(self, r: int, shard: tuple[Any, Any]) -> torch.Tensor:
        device = self.devices[r]
        stream = torch.cuda.stream(self.compute_streams[device]) if self.compute_streams \
            else contextlib.nullcontext()
        with device_context(device), stream:
            with self.host_phase("forward"):
                inputs, targets = (to_device(x, device) for x in shard)
                with autocast(device, self.precision):
                    loss = _loss_of(self.workload.loss_fn, self.replicas[r], inputs, targets)
            with self.host_phase("backward"):
                loss.backward()
        return loss.detach()

    def step(self, step: int, batch: tuple[Any, Any]) -> StepResult:
        shards = self._shards(batch)
        self._reset_step()
        if self._step_graphs is not None:
            return self._graph_step(step, shards)
        if self._pool is not None:
            futures = [self._pool.submit(self._forward_backward, r, s) for r, s in enumerate(shards)]
            losses = [f.result() for f in futures]
        else:
            losses = [self._forward_backward(r, s) for r, s in enumerate(shards)]
        comm_host_s = self._finish_comm()
        with self.host_phase("optimizer"):
            for opt in self.optimizers:
                opt.step()
            for buffers in self._buffers:
                torch._foreach_zero_(buffers)
        return StepResult(loss=self._mean(losses), comm_ms=None if self.comm_streams else comm_host_s * 1e3)

    def _graph_step(self, step: int, shards: list[tuple[Any, Any]]) -> StepResult:
        g = self._step_graphs
        with self.host_phase("load"):
            g.load(shards, step)
        for r in range(len(self.replicas)):  # one phase entry per replica: a timer may start each from idle
            with self.host_phase("forward_backward"):
                g.replay(0, replica=r)
        t0 = time.perf_counter()
        with self.host_phase("all_reduce"):
            if self.compute_streams:
                with self._timed_on(self.compute_streams[self.distinct[0]]):
                    g.replay(1)
            else:
                g.replay(1)
        comm_host_s = time.perf_counter() - t0
        for r in range(len(self.replicas)):
            with self.host_phase("optimizer"):
                g.replay(2, replica=r)
        return StepResult(loss=self._mean(g.losses()), comm_ms=None if self.compute_streams else comm_host_s * 1e3)

    def _mean(self, losses: list[torch.Tensor]) -> torch.Tensor:
        """The mean of the replicas' losses, on the first device, without waiting for it."""
        first = self.devices[0]
        return torch.stack([v.to(first, non_blocking=True) for v in losses]).mean()

    def take_comm_ms(self) -> list[float] | None:
        """CUDA: each step's all-reduce GPU time (ms, on the first device) since the last call; call it after
        the devices were synchronised (it reads CUDA events, which then cost no wait).  CPU: None (the
        host times are in ``StepResult.comm_ms``)."""
        if not self.compute_streams:
            return None
        steps, self._comm_events = self._comm_events, []
        return [sum(start.elapsed_time(end) for start, end in events) for events in steps]

    # ----- results ----------------------------------------------------------------------------------
    def state(self) -> dict[str, torch.Tensor]:
        return parameter_state(self.replicas[0])

    def invariants(self) -> list[str]:
        """Parameters in which some replica differs from replica 0 (of rank 0) by even one bit (should be none).

        Across processes, rank 0's replica 0 is broadcast (one plain collective, after training) and
        every rank compares its own replica 0 with it.
        """
        reference = self.replicas[0].state_dict()
        problems = []
        for r, model in enumerate(self.replicas[1:], start=1):
            for name, t in model.state_dict().items():
                if not torch.equal(t.cpu(), reference[name].cpu()):
                    problems.append(f"replica {r} ({self.devices[r]}) differs from replica 0 in {name!r}")
        if self._group is not None:
            problems += self._cross_process_differences()
        return problems

    def _cross_process_differences(self) -> list[str]:
        names, mine = zip(*self.replicas[0].state_dict().items(), strict=True)
        # compared as bytes: bit-identity is the claim (and NaN == NaN bitwise)
        mine = [t.detach().contiguous().reshape(-1).view(torch.uint8) for t in mine]
        flat = torch.cat(mine)
        theirs = flat.clone()
        self._group.broadcast([theirs], root=0)
        if torch.equal(flat, theirs):
            return []
        offsets, problems = 0, []
        for name, t in zip(names, mine, strict=True):
            n = t.numel()
            if not torch.equal(flat[offsets:offsets + n], theirs[offsets:offsets + n]):
                problems.append(f"rank {self.rank}'s replicas differ from rank 0's in {name!r}")
            offsets += n
        return problems

    def teardown(self) -> None:
        for h in self._hooks:
            h.remove()
        self._hooks.clear()
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        self._step_graphs = None
