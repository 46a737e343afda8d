"""``replicated``: our single-process data parallel — persistent replicas, bucketed all-reduce in backward.

What it does differently from DataParallel, and why:

* **Replicas are made once** (in ``prepare``), one per device, each with its own optimizer; DataParallel
  re-broadcasts the model on every forward.
* **Gradients are averaged by all-reduce** through :func:`gpucomm.comm.all_reduce`, in buckets formed
  as DDP forms them (reverse parameter order, a 1 MiB first bucket, then 25 MiB; see
  :mod:`gpucomm.train._buckets`).  Each replica's gradients *are* views into its flat bucket buffers
  (DDP's ``gradient_as_bucket_view``), so a bucket is reduced in place with no copy.
* **Communication overlaps backward**: a ``register_post_accumulate_grad_hook`` on every replica
  parameter counts ready gradients; when a bucket is ready on every replica its all-reduce is
  launched at once, on a communication stream per device that first waits for the compute stream.
  DataParallel reduces only after the whole backward, onto device 0.
* **Every replica steps its own optimizer** on identical averaged gradients, so no parameter
  broadcast is needed: the replicas stay bit-identical (:meth:`ReplicatedStrategy.invariants`
  proves it).  The sum is divided by the device count on each replica with the same kernel on the
  same input, so the averages are identical too.
* **One Python thread per device** runs forward and backward (like DataParallel's ``parallel_apply``,
  but the threads are a persistent pool).  Autocast is thread-local, so each thread enters it itself.

All bucket launches hold one lock: NCCL needs every device to see collectives in the same order, and
two threads finishing two buckets at once must not interleave their per-device launches.

.. note::
   With a repeated device list (``cuda:0,cuda:0``) every replica shares one GPU: the code paths are
   exercised, the speed is meaningless.
"""

from __future__ import annotations

import contextlib
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any

import torch
from torch import nn

from gpucomm.train._buckets import MiB, plan_buckets
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


def _all_reduce_fn() -> Any:
    try:
        from gpucomm.comm import all_reduce
    except ImportError as exc:
        raise RuntimeError(f"replicated needs gpucomm.comm.all_reduce, which cannot be imported ({exc})") from exc
    return all_reduce


class ReplicatedStrategy(Strategy):
    """Persistent replicas on every device; bucketed, overlapped all-reduce of gradients."""

    name = "replicated"

    def __init__(self, config, devices, *, threads: bool | None = None) -> None:
        super().__init__(config, devices)
        threads = config.replicated_threads if threads is None else threads
        self.use_threads = threads and len(self.devices) > 1
        self._pool: ThreadPoolExecutor | None = None
        self._hooks: list[Any] = []

    # ----- prepare ----------------------------------------------------------------------------------
    def prepare(self, workload: Workload) -> None:
        reset_peak_memory(self.devices)
        self.workload = workload
        self.precision = self.config.resolved_precision(workload.autocast)
        self._all_reduce = _all_reduce_fn()
        self.replicas: list[nn.Module] = [workload.build_model().to(d) for d in self.devices]
        params0 = list(self.replicas[0].parameters())
        self.buckets = plan_buckets(params0, int(self.config.bucket_cap_mb * MiB),
                                    int(self.config.first_bucket_mb * MiB))
        self._buffers = [self._bucket_buffers(m) for m in self.replicas]
        self.optimizers = [make_optimizer(m.parameters(), d, self.config)
                           for m, d in zip(self.replicas, self.devices, strict=True)]
        self._streams()
        self._lock = threading.Lock()
        for r, model in enumerate(self.replicas):
            self._register_hooks(r, list(model.parameters()))
        if self.use_threads:
            self._pool = ThreadPoolExecutor(max_workers=len(self.devices), thread_name_prefix="gpucomm-replica")

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

    def _streams(self) -> None:
        self.distinct = list(dict.fromkeys(self.devices))
        cuda = self.devices[0].type == "cuda"
        self.compute_streams = {d: torch.cuda.current_stream(d) for d in self.distinct} if cuda else {}
        self.comm_streams = {d: torch.cuda.Stream(d) for d in self.distinct} if cuda else {}

    def _register_hooks(self, replica: int, params: list[nn.Parameter]) -> None:
        for b, bucket in enumerate(self.buckets):
            for i in bucket:
                self._hooks.append(params[i].register_post_accumulate_grad_hook(partial(self._ready, b)))

    # ----- the bucket protocol ----------------------------------------------------------------------
    def _reset_step(self) -> None:
        per_bucket = [len(b) * len(self.replicas) for b in self.buckets]
        self._pending = per_bucket
        self._launched = [False] * len(self.buckets)
        self._comm_s = 0.0
        self._events: list[tuple[Any, Any]] = []

    def _ready(self, bucket: int, _param: torch.Tensor) -> None:
        """Gradient hook: count one ready gradient; launch the bucket when all replicas have it."""
        with self._lock:
            self._pending[bucket] -= 1
            if self._pending[bucket] == 0:
                self._launch(bucket)

    def _launch(self, bucket: int) -> None:
        """All-reduce (sum) one bucket across replicas, then divide by n on each: under ``self._lock``."""
        self._launched[bucket] = True
        tensors = [buffers[bucket] for buffers in self._buffers]
        n = len(tensors)
        t0 = time.perf_counter()
        with self._on_comm_streams() as events:
            self._all_reduce(tensors, op="sum", out=tensors)
            for t in tensors:
                t.div_(n)
        self._comm_s += time.perf_counter() - t0
        if events is not None:
            self._events.append(events)

    @contextlib.contextmanager
    def _on_comm_streams(self):
        """Make each device's comm stream current (after it waits for compute); time it with events."""
        if not self.comm_streams:
            yield None
            return
        first = self.distinct[0]
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        with contextlib.ExitStack() as stack:
            for d in self.distinct:
                self.comm_streams[d].wait_stream(self.compute_streams[d])
                stack.enter_context(torch.cuda.stream(self.comm_streams[d]))
            start.record(self.comm_streams[first])
            yield (start, end)
            end.record(self.comm_streams[first])

    def _finish_comm(self) -> float:
        """Launch buckets no hook completed (unused parameters: zero gradients), then join the streams."""
        with self._lock:
            for b, launched in enumerate(self._launched):
                if not launched:
                    self._launch(b)
        for d in self.distinct:
            if self.comm_streams:
                self.compute_streams[d].wait_stream(self.comm_streams[d])
        return self._comm_s

    # ----- one step ---------------------------------------------------------------------------------
    def _forward_backward(self, r: int, shard: tuple[Any, Any]) -> torch.Tensor:
        device = self.devices[r]
        stream = torch.cuda.stream(self.compute_streams[device]) if self.compute_streams \
            else contextlib.nullcontext()
        with device_context(device), stream:
            inputs, targets = (to_device(x, device) for x in shard)
            with autocast(device, self.precision):
                loss = scalar_loss(self.workload.loss_fn(call_model(self.replicas[r], inputs), targets))
            loss.backward()
        return loss.detach()

    def step(self, step: int, batch: tuple[Any, Any]) -> StepResult:
        shards = split_batch(batch, len(self.replicas), self.config.global_batch)
        self._reset_step()
        if self._pool is not None:
            futures = [self._pool.submit(self._forward_backward, r, s) for r, s in enumerate(shards)]
            losses = [f.result() for f in futures]
        else:
            losses = [self._forward_backward(r, s) for r, s in enumerate(shards)]
        comm_host_s = self._finish_comm()
        for opt in self.optimizers:
            opt.step()
        for buffers in self._buffers:
            for flat in buffers:
                flat.zero_()
        loss = sum(v.item() for v in losses) / len(losses)
        return StepResult(loss=loss, comm_ms=self._comm_ms(comm_host_s))

    def _comm_ms(self, host_s: float) -> float:
        """CUDA: GPU time of the all-reduces on the first device's comm stream; CPU: host time in them."""
        if not self._events:
            return host_s * 1e3
        self.comm_streams[self.distinct[0]].synchronize()
        return sum(start.elapsed_time(end) for start, end in self._events)

    # ----- results ----------------------------------------------------------------------------------
    def state(self) -> dict[str, torch.Tensor]:
        return parameter_state(self.replicas[0])

    def invariants(self) -> list[str]:
        """Parameters in which some replica differs from replica 0 by even one bit (should be none)."""
        reference = self.replicas[0].state_dict()
        problems = []
        for r, model in enumerate(self.replicas[1:], start=1):
            for name, t in model.state_dict().items():
                if not torch.equal(t.cpu(), reference[name].cpu()):
                    problems.append(f"replica {r} ({self.devices[r]}) differs from replica 0 in {name!r}")
        return problems

    def teardown(self) -> None:
        for h in self._hooks:
            h.remove()
        self._hooks.clear()
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
