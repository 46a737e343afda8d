"""The training loop every strategy runs through, and how it measures without changing what it measures.

One loop for all strategies (and for each rank of a multi-process one), so timing and data are identical.

**Data.**  Step ``s``'s global batch is ``workload.batch_fn(seed, s, global_batch)``.  Every step's batch
is made (and, on CUDA, pinned) *before* the first step: making data is the same work for every
strategy and is not what is compared, and a copy from pageable memory would make the host wait for
the stream inside a step.  Inside the step the strategy copies its shard with ``non_blocking=True``,
as a loop fed by ``DataLoader(pin_memory=True)`` does.

**Timing on CUDA** — nothing in the timed window waits for the device:

* warmup steps (the first ``warmup_steps``) run one at a time, the host waiting for the devices
  *before* each step, outside any timer; they are left out of the step-time statistics;
* then one window over the timed steps: the host only enqueues (no ``synchronize``, no ``float(loss)``;
  losses stay on the device), so it runs ahead of the GPU exactly as a user's loop does;
* each step records a CUDA event on every device it drives, at its start and at its end, on the
  current stream (recording an event is an enqueue: no sync, no allocation);
* after the window, one synchronize; then the step time of a timed step ``s`` is, per device, the time from the
  end event of step ``s-1`` to that of step ``s`` — the cadence at which steps complete, which is what
  throughput is — and the longest over the devices this process drives (a warmup step, which began
  on idle devices, is timed from its own start event to its end); the GPU time
  (``gpu_ms``) of step ``s`` is start-to-end on the first device (its busy time when the host is
  ahead);
* ``window_ms`` is the host clock from the synchronize before the window to the synchronize after it:
  ``window_ms / timed steps`` is the mean step time by the plain method a user would use.

**Timing on CPU** — there are no events and CPU operations run synchronously in the calling thread,
so a step's time is the host clock around ``strategy.step`` (and its host time is the same number).

**Host time.**  ``host_ms`` of a step is the host clock around the ``strategy.step`` call alone.  It is
taken from the warmup steps after the first (each starts with the devices idle and the launch queue
empty, so the figure is the time to enqueue the step, with no wait for a full queue); without two
warmup steps it comes from the timed steps, where a host that is ahead of the GPU may block in a
launch (``host_source`` says which).  The strategy's own phases (:meth:`Strategy.host_phase`) are read
and reset after each step.

**Memory.**  ``torch.cuda.max_memory_allocated`` per device, reset in ``prepare``; the loop keeps only
0-dim loss tensors alive between steps, and drops each step's batch once the step is enqueued.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from gpucomm.train.config import TrainConfig
from gpucomm.train.models import Workload
from gpucomm.train.strategies.base import Strategy, pin

__all__ = ["RunResult", "StepClock", "StrategyInterrupted", "median_phases", "run_strategy"]


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
    """Every step's time (warmup included; see the module notes for how each is measured)."""
    gpu_ms: list[float] | None = None
    """Per timed step, start-to-end CUDA event time on the first device; None on CPU."""
    host_ms: list[float] = field(default_factory=list)
    """Host time of the ``step()`` call, for the steps ``host_source`` names."""
    host_source: str = ""
    """Which steps ``host_ms`` comes from: "warmup steps, devices idle before each" or "timed steps"."""
    host_phases_ms: list[dict[str, float]] = field(default_factory=list)
    """Per step of ``host_ms``, the strategy's host time by phase."""
    devices_driven: int = 1
    """Devices one process of the strategy drives (``host_ms_per_device`` divides by this)."""
    graphs: bool = False
    """Whether the steps replayed CUDA graphs (the strategy's ``graphs`` after the run)."""
    window_ms: float | None = None
    """Host clock over the timed steps, from a synchronize before them to one after them."""
    comm_ms: list[float] | None = None
    peak_mem_bytes: list[int] = field(default_factory=list)
    params: int | None = None
    state: dict[str, torch.Tensor] = field(default_factory=dict)
    """Final parameters (CPU copies), keyed by name."""
    problems: list[str] = field(default_factory=list)
    """Invariant violations the strategy found in itself (e.g. replicas that differ)."""


class StepClock:
    """Per-step CUDA events on every distinct CUDA device of a strategy; nothing on CPU.

    ``start(s)`` / ``end(s)`` record an event on each device's current stream (an enqueue: no sync).
    After the caller has synchronized, :meth:`step_ms` and :meth:`gpu_ms` read them.
    """

    def __init__(self, devices: list[torch.device], steps: int) -> None:
        self.devices = [d for d in dict.fromkeys(devices) if d.type == "cuda"]
        self.enabled = bool(self.devices)
        if self.enabled:
            self._start = [[torch.cuda.Event(enable_timing=True) for _ in range(steps)] for _ in self.devices]
            self._end = [[torch.cuda.Event(enable_timing=True) for _ in range(steps)] for _ in self.devices]

    def _record(self, events: list[list[Any]], s: int) -> None:
        for d, per_device in zip(self.devices, events, strict=True):
            per_device[s].record(torch.cuda.current_stream(d))

    def start(self, s: int) -> None:
        if self.enabled:
            self._record(self._start, s)

    def end(self, s: int) -> None:
        if self.enabled:
            self._record(self._end, s)

    def step_ms(self, first: int, last: int) -> list[float]:
        """Steps ``first..last-1``: end of the previous step to end of this one, longest over devices.

        Step ``first`` (no previous end inside the window) is measured from its own start event.
        """
        out = []
        for s in range(first, last):
            times = [(ends[s - 1] if s > first else starts[s]).elapsed_time(ends[s])
                     for starts, ends in zip(self._start, self._end, strict=True)]
            out.append(max(times))
        return out

    def gpu_ms(self, first: int, last: int) -> list[float]:
        """Steps ``first..last-1``: start-to-end on the first device."""
        return [self._start[0][s].elapsed_time(self._end[0][s]) for s in range(first, last)]

    def span_ms(self, first: int, last: int) -> list[float]:
        """Steps ``first..last-1``: start-to-end, longest over devices (for steps that began on idle devices)."""
        return [max(starts[s].elapsed_time(ends[s]) for starts, ends in zip(self._start, self._end, strict=True))
                for s in range(first, last)]


def _stage_batches(workload: Workload, config: TrainConfig, cuda: bool) -> list[Any]:
    batches = []
    for s in range(config.steps):
        batch = workload.batch_fn(config.seed, s, config.global_batch)
        batches.append(pin(batch) if cuda else batch)
    return batches


def _loss_values(losses: list[Any]) -> list[float]:
    """Device losses to floats, after the window: one transfer per device, not one sync per step."""
    by_device: dict[Any, list[int]] = {}
    for i, v in enumerate(losses):
        if isinstance(v, torch.Tensor):
            by_device.setdefault(v.device, []).append(i)
    out = [float(v) if not isinstance(v, torch.Tensor) else 0.0 for v in losses]
    for _, idx in by_device.items():
        values = torch.stack([losses[i].detach().reshape(()).float() for i in idx]).cpu().tolist()
        for i, v in zip(idx, values, strict=True):
            out[i] = v
    return out


class StrategyInterrupted(KeyboardInterrupt):
    """Ctrl-C (or SIGTERM) while a strategy ran in this process, with the steps it had finished.

    ``partial`` is a :class:`RunResult` of the first ``done`` steps (losses, step times, host time,
    peak memory; no final parameters), or None when no step had finished or the devices could not be
    read back.  It is still a ``KeyboardInterrupt``: code that does not know it stops as before.
    """

    def __init__(self, strategy: str, done: int, total: int, partial: RunResult | None) -> None:
        super().__init__(f"{strategy} interrupted after {done} of {total} steps")
        self.strategy, self.done, self.total, self.partial = strategy, done, total, partial


@dataclass(slots=True)
class _Trace:
    """What the loop has measured so far (every list holds one entry per step enqueued)."""

    host_s: list[float] = field(default_factory=list)
    phases: list[dict[str, float]] = field(default_factory=list)
    losses: list[Any] = field(default_factory=list)
    comm: list[float] = field(default_factory=list)
    window_t0: float | None = None
    done: int = 0
    """Steps whose ``step()`` returned and whose end event is recorded."""


def _collect(strategy: Strategy, config: TrainConfig, clock: StepClock, trace: _Trace, *, world_size: int,
             devices: list[torch.device] | None, complete: bool) -> RunResult:
    """The result of the first ``trace.done`` steps; waits for the devices (after the window only)."""
    done, warmup = trace.done, config.warmup_steps
    strategy.synchronize()
    window_ms = (time.perf_counter() - trace.window_t0) * 1e3 if complete and trace.window_t0 is not None else None
    late_comm = strategy.take_comm_ms() if complete else None  # CUDA events, readable without waiting only now
    comm = late_comm if late_comm is not None else trace.comm[:done]
    step_ms = [t * 1e3 for t in trace.host_s[:done]]  # CPU: the host clock is the step time
    gpu_ms = None
    if clock.enabled:
        step_ms = clock.span_ms(0, min(warmup, done)) + clock.step_ms(warmup, max(warmup, done))
        gpu_ms = clock.gpu_ms(warmup, max(warmup, done))
    probe = range(1, min(warmup, done)) if (clock.enabled and warmup >= 2) else range(warmup, done)
    state = strategy.state() if complete else {}
    return RunResult(
        strategy=strategy.name, devices=[str(d) for d in (devices or strategy.devices)],
        world_size=world_size, precision=strategy.precision, losses=_loss_values(trace.losses[:done]),
        step_ms=step_ms, gpu_ms=gpu_ms, host_ms=[trace.host_s[i] * 1e3 for i in probe],
        host_source="warmup steps, devices idle before each" if probe.start == 1 and clock.enabled
        else "timed steps",
        host_phases_ms=[{k: v * 1e3 for k, v in trace.phases[i].items()} for i in probe],
        devices_driven=len(strategy.devices), window_ms=window_ms, graphs=bool(strategy.graphs),
        comm_ms=comm or None, peak_mem_bytes=strategy.peak_memory(),
        params=sum(t.numel() for t in state.values()) if complete else None, state=state,
        problems=strategy.invariants() if complete else [],
    )


def _partial(strategy: Strategy, config: TrainConfig, clock: StepClock | None, trace: _Trace, *,
             world_size: int, devices: list[torch.device] | None) -> RunResult | None:
    """The finished steps of an interrupted run, or None (no step finished, or the devices failed)."""
    if clock is None or trace.done == 0:
        return None
    try:
        return _collect(strategy, config, clock, trace, world_size=world_size, devices=devices, complete=False)
    except Exception:  # a half-enqueued step may have left the devices unreadable: keep nothing
        return None


def run_strategy(strategy: Strategy, workload: Workload, config: TrainConfig, *, world_size: int = 1,
                 devices: list[torch.device] | None = None,
                 on_step: Callable[[int, int], None] | None = None) -> RunResult:
    """Prepare ``strategy``, run ``config.steps`` steps, collect results, and always tear down.

    ``on_step(done, total)`` is called after each step is enqueued (a progress display; it must be
    cheap: it runs inside the timed window).

    Raises:
        StrategyInterrupted: a ``KeyboardInterrupt`` arrived; it carries the finished steps.
    """
    trace, clock = _Trace(), None
    try:
        strategy.prepare(workload)
        cuda = any(d.type == "cuda" for d in strategy.devices)
        batches = _stage_batches(workload, config, cuda)
        steps, warmup = config.steps, config.warmup_steps
        clock = StepClock(strategy.devices, steps)
        strategy.take_host_phases()
        for s in range(steps):
            if s <= warmup:
                strategy.synchronize()  # before warmup steps and the window; never inside the window
                if s == warmup:
                    trace.window_t0 = time.perf_counter()
            clock.start(s)
            t0 = time.perf_counter()
            result = strategy.step(s, batches[s])
            trace.host_s.append(time.perf_counter() - t0)
            clock.end(s)
            trace.phases.append(strategy.take_host_phases())
            batches[s] = None  # the step holds what it still needs; the loop keeps no batch alive
            trace.losses.append(result.loss)
            if result.comm_ms is not None:
                trace.comm.append(result.comm_ms)
            trace.done = s + 1
            if on_step is not None:
                on_step(s + 1, steps)
        return _collect(strategy, config, clock, trace, world_size=world_size, devices=devices, complete=True)
    except StrategyInterrupted:
        raise
    except KeyboardInterrupt:
        partial = _partial(strategy, config, clock, trace, world_size=world_size, devices=devices)
        raise StrategyInterrupted(strategy.name, trace.done, config.steps, partial) from None
    finally:
        strategy.teardown()


def median_phases(phases: list[dict[str, float]]) -> dict[str, float]:
    """Median per phase over steps (a phase missing from a step counts as 0 there)."""
    keys = dict.fromkeys(k for p in phases for k in p)
    return {k: statistics.median(p.get(k, 0.0) for p in phases) for k in keys}
