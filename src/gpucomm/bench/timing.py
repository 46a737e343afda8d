"""The three timing modes of ``gpucomm bench`` (``docs/performance.md`` §3).

* ``cuda-events`` — start/end events on the current stream of every held device around each op,
  ops enqueued back to back; an iteration's time is the largest end−start over the devices.
* ``cuda-graph`` — :data:`GRAPH_OPS` ops captured into one CUDA graph; each replay is timed with
  events and divided by :data:`GRAPH_OPS`.  Labelled in every row; not comparable with eager rows.
* ``perf-counter`` — ``time.perf_counter()`` around each op plus a synchronisation (CPU devices).

Each timer's :meth:`run` takes ``step(i)`` (perform the i-th op, rotating buffers) and returns one
time in seconds per iteration.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import torch

__all__ = ["CUDA_EVENTS", "CUDA_GRAPH", "GRAPH_OPS", "PERF_COUNTER", "EventTimer", "GraphTimer",
           "PerfCounterTimer", "make_timer"]

CUDA_EVENTS = "cuda-events"
CUDA_GRAPH = "cuda-graph"
PERF_COUNTER = "perf-counter"
GRAPH_OPS = 10
"""Ops captured per CUDA graph; a replay's time is divided by this."""

Step = Callable[[int], object]


def _cuda_indices(devices: Sequence[torch.device]) -> list[int]:
    return sorted({d.index for d in devices if d.type == "cuda"})


class PerfCounterTimer:
    """Host wall-clock per op, with the backend's synchronisation inside the timed interval."""

    mode = PERF_COUNTER

    def __init__(self, synchronize: Callable[[], None]) -> None:
        self._sync = synchronize

    def run(self, step: Step, iters: int) -> list[float]:
        times = []
        for i in range(iters):
            t0 = time.perf_counter()
            step(i)
            self._sync()
            times.append(time.perf_counter() - t0)
        return times


class EventTimer:
    """CUDA events on every held device's current stream; the slowest device sets an iteration's time."""

    mode = CUDA_EVENTS

    def __init__(self, devices: Sequence[torch.device]) -> None:
        self._indices = _cuda_indices(devices)

    def run(self, step: Step, iters: int) -> list[float]:
        # Events and streams are made before the loop, so nothing but the op itself (and one event
        # record) sits between a start and an end record.
        streams = [torch.cuda.current_stream(i) for i in self._indices]
        starts = [[torch.cuda.Event(enable_timing=True) for _ in streams] for _ in range(iters)]
        ends = [[torch.cuda.Event(enable_timing=True) for _ in streams] for _ in range(iters)]
        for i in range(iters):
            for ev, stream in zip(starts[i], streams, strict=True):
                ev.record(stream)
            step(i)
            for ev, stream in zip(ends[i], streams, strict=True):
                ev.record(stream)
        for index in self._indices:
            torch.cuda.synchronize(index)
        return [max(s.elapsed_time(e) for s, e in zip(st, en, strict=True)) / 1e3
                for st, en in zip(starts, ends, strict=True)]


class GraphTimer:
    """Capture :data:`GRAPH_OPS` ops in one CUDA graph, replay it per iteration, time it with events.

    :meth:`capture` must be called first; it raises whatever the capture raises (the runner turns it
    into a skipped row with the reason).
    """

    mode = CUDA_GRAPH

    def __init__(self, device: torch.device) -> None:
        self._device = device
        self._graph: torch.cuda.CUDAGraph | None = None

    def capture(self, step: Step, ops: int = GRAPH_OPS, warmup: int = 2) -> torch.cuda.CUDAGraph:
        """Eager warmup on a side stream (as torch.cuda.graphs asks), then capture ``ops`` steps."""
        with torch.cuda.device(self._device):
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for i in range(warmup):
                    step(i)
            torch.cuda.current_stream().wait_stream(side)
            torch.cuda.synchronize()
            graph = torch.cuda.CUDAGraph()
            # thread_local: only this thread's unsafe calls invalidate the capture, so the NCCL watchdog
            # (or any other thread) querying events meanwhile does not (pytorch/pytorch #104555, #148594).
            with torch.cuda.graph(graph, capture_error_mode="thread_local"):
                for i in range(ops):
                    step(i)
            torch.cuda.synchronize()
        self._graph = graph
        return graph

    def run(self, step: Step, iters: int) -> list[float]:
        if self._graph is None:
            self.capture(step)
        graph = self._graph
        with torch.cuda.device(self._device):
            stream = torch.cuda.current_stream()
            pairs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                     for _ in range(iters)]
            for start, end in pairs:
                start.record(stream)
                graph.replay()
                end.record(stream)
            torch.cuda.synchronize()
        return [s.elapsed_time(e) / 1e3 / GRAPH_OPS for s, e in pairs]


def make_timer(mode: str, devices: Sequence[torch.device], synchronize: Callable[[], None]):
    """The timer for ``mode`` over the held ``devices``."""
    if mode == PERF_COUNTER:
        return PerfCounterTimer(synchronize)
    if mode == CUDA_EVENTS:
        return EventTimer(devices)
    if mode == CUDA_GRAPH:
        return GraphTimer(devices[0])
    raise ValueError(f"timing: unknown mode {mode!r}; expected {CUDA_EVENTS}, {CUDA_GRAPH} or {PERF_COUNTER}")
