"""The gradient all-reduce: every replica's gradients in flat buckets, averaged over every replica during backward.

**Layout.**  Each replica's gradients *are* views into flat per-bucket buffers (DDP's
``gradient_as_bucket_view``), so a bucket is reduced in place with no copy.  Buckets are formed as DDP
forms them (:func:`~gpucomm.parallel.buckets.plan_buckets`: reverse parameter order, a 1 MiB first
bucket, then 25 MiB, a new bucket at a dtype change).  Only parameters that require a gradient are
bucketed.  Every bucket's collectives are **prepared** once (``Communicator.prepare``: checked once,
rerun on the same buffers with no per-call checks):

* one process: ``all_reduce`` over the replicas (a LocalCommunicator);
* one replica per process: ``all_reduce`` over the processes (a ProcessGroupCommunicator);
* the hybrid (k replicas per process): ``reduce`` onto replica 0 within the process, ``all_reduce`` of
  replica 0's bucket across processes, ``broadcast`` back within the process — one inter-process
  message per bucket per process.

The sum is then divided by the replica count on every replica, with the same kernel on identical
inputs, so every replica holds bit-identical averages.

**Overlap (eager).**  A ``register_post_accumulate_grad_hook`` on every replica parameter counts ready
gradients; a bucket is launched as soon as it is ready on every replica of this process, **in bucket
order** (every device and every process must see the collectives in the same sequence), on a
communication stream per device that first waits for the compute stream.  All launches hold one lock:
on CUDA the autograd engine runs each device's backward in its own thread.  At the end of the
backward (a callback queued with the autograd engine, as DDP does) buckets no hook completed are
launched too — a parameter no replica used contributes zeros — and the compute streams wait for the
communication streams, so whatever runs next (clipping, the optimizer) sees the averages.

**Which backward passes reduce.**  The forward decides, as DDP's does: a forward inside
:meth:`no_sync` prepares a backward that only accumulates into the buckets; the next backward of a
forward outside it averages everything accumulated.  Because the reduction *averages* and the loss
hands each replica its gradient multiplied by the replica count (:mod:`gpucomm.parallel.loss`), an
accumulated, already-averaged gradient plus new local ones averages to the right total: several
backward passes per step are correct with or without ``no_sync`` (``no_sync`` only saves the
communication).

**Parameters without a gradient.**  A parameter that no replica gave a gradient since the last
``zero_grad(set_to_none=True)`` has ``.grad = None`` on every replica after the reducing backward, so
the optimizer skips it exactly as it does on one device (its view is put back before the next
backward).  Across processes this is not done (it would need another collective per step): such a
parameter keeps its averaged gradient, zero where nobody used it — what DDP does.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from functools import partial
from typing import Any

import torch
from torch import nn

from gpucomm.communicator import Communicator
from gpucomm.parallel.buckets import plan_buckets

__all__ = ["GradientReducer"]

_NULL = contextlib.nullcontext()


def _no_phase(name: str) -> contextlib.AbstractContextManager:
    return _NULL


class GradientReducer:
    """Flat gradient buckets for a set of replicas, averaged over every replica (module notes).

    Args:
        params: each replica's parameters that require a gradient, in the same order on every replica.
        local: the communicator across this process's replicas, or None (one replica here).
        group: the communicator across processes (holding replica 0's device), or None (one process).
        cap_bytes, first_cap_bytes: bucket caps (``plan_buckets``); None: one bucket per dtype.
        overlap: launch buckets from gradient hooks during backward (eager); False: the caller runs
            :meth:`reduce_all` itself (CUDA graphs issue it between captured segments).
        phase: ``phase(name)`` returns a context manager around each host phase (timing; default none).
    """

    def __init__(self, params: Sequence[Sequence[nn.Parameter]], local: Communicator | None,
                 group: Communicator | None, *, cap_bytes: int | None, first_cap_bytes: int | None,
                 overlap: bool = True, phase: Callable[[str], contextlib.AbstractContextManager] = _no_phase) -> None:
        self.params = [list(p) for p in params]
        self.local, self.group = local, group
        self.n_total = (local.n if local is not None else 1) * (group.n if group is not None else 1)
        self.phase = phase
        first = self.params[0]
        if cap_bytes is None or first_cap_bytes is None:  # one bucket per dtype
            cap_bytes = first_cap_bytes = sum(p.numel() * p.element_size() for p in first) + 1
        self.buckets = plan_buckets(first, cap_bytes, first_cap_bytes) if first else []
        self._bucket_of = [0] * len(first)
        for b, bucket in enumerate(self.buckets):
            for i in bucket:
                self._bucket_of[i] = b
        self.views: list[list[torch.Tensor]] = []
        self.buffers: list[list[torch.Tensor]] = [self._flat(r) for r in range(len(self.params))]
        self._reducers = [self._prepare(b) for b in range(len(self.buckets))]
        devices = [ps[0].device for ps in self.params] if first else []
        self.distinct = list(dict.fromkeys(devices))
        self._cuda = bool(devices) and devices[0].type == "cuda"
        self.comm_streams = {d: torch.cuda.Stream(d) for d in self.distinct} if self._cuda and overlap else {}
        self.compute_streams: dict[torch.device, Any] = {}
        self._lock = threading.Lock()
        self.has_grad = [False] * len(first)
        """Per parameter: some replica produced a gradient since the last zero_grad (``set_to_none``)."""
        self._detached: list[int] = []
        self.sync = True
        self.record_comm_time = False
        self._comm: list[Any] = []
        self._hooks = [p.register_post_accumulate_grad_hook(partial(self._ready, r, i))
                       for r, ps in enumerate(self.params) for i, p in enumerate(ps)] if overlap else []
        self._reset()

    # ----- layout -----------------------------------------------------------------------------------
    def _flat(self, replica: int) -> list[torch.Tensor]:
        """One zeroed flat buffer per bucket; each parameter's ``.grad`` becomes a view into it."""
        params = self.params[replica]
        views: list[torch.Tensor] = [None] * len(params)  # type: ignore[list-item]
        buffers = []
        for bucket in self.buckets:
            first = params[bucket[0]]
            flat = torch.zeros(sum(params[i].numel() for i in bucket), dtype=first.dtype, device=first.device)
            offset = 0
            for i in bucket:
                n = params[i].numel()
                views[i] = flat[offset:offset + n].view_as(params[i])
                params[i].grad = views[i]
                offset += n
            buffers.append(flat)
        self.views.append(views)
        return buffers

    def _prepare(self, bucket: int) -> list[Callable[[], Any]]:
        """The prepared collectives that leave bucket ``bucket`` summed over every replica, on every replica."""
        tensors = [buffers[bucket] for buffers in self.buffers]
        local, group = self.local, self.group
        if group is None:
            return [local.prepare("all_reduce", tensors, "sum")]
        if local is None:
            return [group.prepare("all_reduce", tensors, "sum")]
        return [local.prepare("reduce", tensors, 0, "sum"),  # root 0, op
                group.prepare("all_reduce", tensors[:1], "sum"),
                local.prepare("broadcast", tensors, 0)]

    # ----- the step protocol ------------------------------------------------------------------------
    def _reset(self) -> None:
        self._pending = [len(b) * len(self.params) for b in self.buckets]
        self._next = 0
        self._queued = False
        self._comm_s = 0.0
        self._events: list[tuple[Any, Any]] = []

    def prepare_for_backward(self, sync: bool) -> None:
        """Called by a forward with gradients: the next backward reduces (``sync``) or only accumulates."""
        self.sync = sync
        self._reset()
        if self._detached:
            self._attach()
        if self._cuda:
            self.compute_streams = {d: torch.cuda.current_stream(d) for d in self.distinct}

    def _attach(self) -> None:
        """Put back the views of parameters whose ``.grad`` was set to None (their slices are zero)."""
        for i in self._detached:
            for r, ps in enumerate(self.params):
                ps[i].grad = self.views[r][i]
        self._detached = []

    def _ready(self, replica: int, index: int, param: torch.Tensor) -> None:
        """Gradient hook: one replica's gradient of parameter ``index`` is accumulated."""
        if param.grad is not self.views[replica][index]:  # .grad was replaced (set to None, then re-made)
            self.views[replica][index].copy_(param.grad)
            param.grad = self.views[replica][index]
        with self._lock:
            self.has_grad[index] = True
            if not self.sync:
                return
            if not self._queued:
                self._queued = True
                torch.autograd.Variable._execution_engine.queue_callback(self._finish)
            self._pending[self._bucket_of[index]] -= 1
            while self._next < len(self.buckets) and self._pending[self._next] <= 0:
                self._launch(self._next)
                self._next += 1

    def _launch(self, bucket: int) -> None:
        """Sum one bucket over every replica, then divide by the replica count on each (under the lock)."""
        tensors = [buffers[bucket] for buffers in self.buffers]
        t0 = time.perf_counter()
        with self.phase("all_reduce"), self._on_comm_streams():
            for call in self._reducers[bucket]:
                call()
            for t in tensors:
                t.div_(self.n_total)
        self._comm_s += time.perf_counter() - t0

    def _finish(self) -> None:
        """End of a reducing backward: launch what is left, join the streams, detach unused gradients."""
        with self._lock:
            while self._next < len(self.buckets):
                self._launch(self._next)
                self._next += 1
            for d in self.distinct:
                if d in self.comm_streams and d in self.compute_streams:
                    self.compute_streams[d].wait_stream(self.comm_streams[d])
            if self.record_comm_time:
                self._comm.append(list(self._events) if self.comm_streams else self._comm_s * 1e3)
            if self.group is None:
                self._detach_unused()
            self._reset()

    def _detach_unused(self) -> None:
        unused = [i for i, used in enumerate(self.has_grad) if not used]
        for i in unused:
            for ps in self.params:
                ps[i].grad = None
        self._detached = unused

    def reduce_all(self) -> None:
        """Every bucket's collectives, in order, on the current streams; sums only (graphs divide later).
        Timed like the overlapped launches when ``record_comm_time`` (CUDA events on the first device's
        current stream; host time on CPU)."""
        timed = self.record_comm_time
        if timed and self._cuda:
            stream = torch.cuda.current_stream(self.distinct[0])
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record(stream)
        t0 = time.perf_counter()
        for reducer in self._reducers:
            for call in reducer:
                call()
        if timed:
            if self._cuda:
                end.record(stream)
                self._comm.append([(start, end)])
            else:
                self._comm.append((time.perf_counter() - t0) * 1e3)

    @contextlib.contextmanager
    def _on_comm_streams(self) -> Iterator[None]:
        """Make each device's comm stream current (after it waits for compute); bracket it with events."""
        if not self.comm_streams:
            yield
            return
        with contextlib.ExitStack() as stack:
            for d in self.distinct:
                compute = self.compute_streams.get(d) or torch.cuda.current_stream(d)
                self.comm_streams[d].wait_stream(compute)
                stack.enter_context(torch.cuda.stream(self.comm_streams[d]))
            if not self.record_comm_time:
                yield
                return
            stream = self.comm_streams[self.distinct[0]]
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record(stream)
            yield
            end.record(stream)
            self._events.append((start, end))

    # ----- gradients as the optimizer sees them -----------------------------------------------------
    def any_grad(self) -> bool:
        """Whether some parameter has a gradient (False right after ``zero_grad``: a step would do nothing)."""
        return self.group is not None or any(self.has_grad)

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Zero every bucket; ``set_to_none``: parameters count as having no gradient until a backward gives one
        (their ``.grad`` stays a zero view until then, as DDP's bucket views do)."""
        for buffers in self.buffers:
            if buffers:
                torch._foreach_zero_(buffers)
        if self._detached:
            self._attach()
        self.has_grad = [not set_to_none] * len(self.has_grad)

    def take_comm_ms(self) -> list[float]:
        """Each reducing backward's all-reduce time (ms) since the last call, when ``record_comm_time``: on CUDA
        the GPU time on the first device's comm stream (read its events after a synchronize), on CPU the host
        time inside the collectives."""
        taken, self._comm = self._comm, []
        return [sum(s.elapsed_time(e) for s, e in x) if isinstance(x, list) else x for x in taken]

    def close(self) -> None:
        """Remove the gradient hooks (the buffers stay the parameters' gradients)."""
        for h in self._hooks:
            h.remove()
        self._hooks = []
