"""The measurement loop: plan the points, and for each one warm up, time, check and build a row.

:func:`plan` enumerates the points of a run — op × dtype × reduction op × size × backend ×
placement, in that order, baselines first — so that rows of different backends for one size arrive
side by side and a row's ratio can be computed when it arrives.  :func:`measure` takes one point
through the method of ``docs/performance.md`` §3 and §5 and returns a :class:`BenchRecord`;
:func:`run_points` does that for a list of points, handing each row to ``emit`` as soon as it exists.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence

import torch

from gpucomm import collectives
from gpucomm.bench import check as _checks
from gpucomm.bench import metrics, timing
from gpucomm.bench.backends import Backend
from gpucomm.bench.buffers import BufferSet, Case, allocate, fill, plan_case, set_nbytes
from gpucomm.bench.check import count_wrong, expected
from gpucomm.bench.config import BenchConfig
from gpucomm.records import BenchRecord

__all__ = ["ROTATE_BYTES", "GraphCaptureError", "Point", "measure", "plan", "run_points", "unsupported_reasons"]

ROTATE_BYTES = {"cuda": 256 << 20, "cpu": 32 << 20}
"""Bytes of buffers a row rotates through, at least (docs/performance.md §3.1)."""
_MAX_SETS = 8

Combine = Callable[[list[float], int], tuple[list[float], int]]
"""Combines one rank's (iteration times, #wrong) with the other ranks' (max, sum)."""


class GraphCaptureError(RuntimeError):
    """A backend's op could not be captured into a CUDA graph: the point is skipped, not failed."""


@dataclasses.dataclass(frozen=True, slots=True)
class Point:
    """One row to measure: a backend and a case."""

    backend: str
    case: Case


def plan(cfg: BenchConfig, backend_classes: Sequence[type[Backend]], n: int) -> list[Point]:
    """Every point of the run for these backends with ``n`` participants, in measuring order."""
    points: list[Point] = []
    seen: set[tuple[str, Case]] = set()
    for op in cfg.ops:
        spec = collectives.get(op)
        for dtype in cfg.dtypes:
            for rop in cfg.reduce_ops if spec.reduces else (None,):
                for size in cfg.sizes:
                    for cls in backend_classes:
                        if cls.unsupported(op, dtype, rop, cfg.device_type):
                            continue
                        for placement in cls.placements(op):
                            case = plan_case(op, size, n, dtype, rop, placement, cfg.root)
                            if case is not None and (cls.name, case) not in seen:
                                seen.add((cls.name, case))
                                points.append(Point(cls.name, case))
    return points


def unsupported_reasons(cfg: BenchConfig, backend_classes: Sequence[type[Backend]]) -> list[str]:
    """One line per (backend, reason) that leaves points out of the run, for the run's preamble."""
    lines: dict[str, None] = {}
    for op in cfg.ops:
        rops = cfg.reduce_ops if collectives.get(op).reduces else (None,)
        for cls in backend_classes:
            for dtype in cfg.dtypes:
                for rop in rops:
                    reason = cls.unsupported(op, dtype, rop, cfg.device_type)
                    if reason:
                        lines[f"{cls.name}: {reason}"] = None
    return list(lines)


def _rotation(case: Case, backend: Backend, first: BufferSet, mode: str) -> int:
    per_set = max(1, set_nbytes(first))
    sets = math.ceil(ROTATE_BYTES.get(backend.device_type, ROTATE_BYTES["cpu"]) / per_set)
    return max(1, min(_MAX_SETS, sets, timing.GRAPH_OPS if mode == timing.CUDA_GRAPH else _MAX_SETS))


def _check(backend: Backend, case: Case, bufs: BufferSet, cfg: BenchConfig) -> int:
    """#wrong over ``cfg.check`` fresh runs of the op on ``bufs`` (-1 when checking is off)."""
    if cfg.check == 0:
        return -1
    graph_outputs: list = []
    graph = None
    if cfg.timing == timing.CUDA_GRAPH:  # check the graph path itself: replay a one-op graph
        try:
            graph = timing.GraphTimer(backend.devices[0]).capture(
                lambda _i: graph_outputs.append(backend.call(case, bufs)), ops=1, warmup=0)
        except Exception as exc:
            raise GraphCaptureError(f"{type(exc).__name__}: {exc}") from exc
    wrong = 0
    for _ in range(cfg.check):
        fill(case, bufs, backend.participants)
        backend.synchronize()
        if graph is not None:
            graph.replay()
            returned = graph_outputs[-1]
        else:
            returned = backend.call(case, bufs)
        backend.synchronize()
        outputs = bufs.outputs if returned is None else returned
        for k, p in enumerate(backend.participants):
            want = expected(case.op, p, n=case.n, count=case.count, dtype=case.dtype,
                            reduce_op=case.reduce_op, root=case.root or 0, device=backend.devices[k])
            if want is not None:
                wrong += count_wrong(outputs[k], want, case.reduce_op)
    _checks.release()
    return wrong


def measure(backend: Backend, case: Case, cfg: BenchConfig, combine: Combine | None = None) -> BenchRecord:
    """Warm up, time and check one point (docs/performance.md §3, §5); returns its row."""
    mode = cfg.timing
    first = allocate(case, backend.participants, backend.devices)
    sets = [first] + [allocate(case, backend.participants, backend.devices)
                      for _ in range(_rotation(case, backend, first, mode) - 1)]
    for bufs in sets:
        fill(case, bufs, backend.participants)

    calls = [backend.bind(case, bufs) for bufs in sets]

    def step(i: int) -> None:
        calls[i % len(calls)]()

    backend.synchronize()
    backend.barrier()
    for i in range(cfg.warmup):
        step(i)
    backend.synchronize()
    timer = timing.make_timer(mode, backend.devices, backend.synchronize)
    if mode == timing.CUDA_GRAPH:
        try:
            timer.capture(step)
        except Exception as exc:
            raise GraphCaptureError(f"{type(exc).__name__}: {exc}") from exc
    backend.barrier()
    times = timer.run(step, cfg.iters)
    backend.synchronize()
    backend.barrier()
    wrong = _check(backend, case, sets[0], cfg)
    if combine is not None:
        times, wrong = combine(times, wrong)
    return _record(backend, case, cfg, mode, times, wrong)


def _note(backend: Backend, case: Case) -> str:
    notes = []
    if case.n == 1:
        # nccl-tests' formulas still apply, but with one participant nothing crosses a link: a
        # rooted op's busbw (factor 1) is then a launch rate, not a bandwidth, and must not be read as one.
        notes.append("one participant: no data crosses a link; bandwidths are not link figures")
    if backend.name == "torch.distributed" and case.op is collectives.CollectiveName.SEND_RECV and case.n == 1:
        notes.append("world of one: send_recv is a local copy (torch refuses self-sends)")
    if backend.name == "torch.cuda.comm" and case.op is collectives.CollectiveName.REDUCE:
        notes.append("reduce_add allocates its result (no out=)")
    return "; ".join(notes)


def _record(backend: Backend, case: Case, cfg: BenchConfig, mode: str, times: list[float],
            wrong: int) -> BenchRecord:
    stats = metrics.summarize(times)
    algbw, busbw = metrics.bandwidths(case.op, case.size, case.n, stats.median_us)
    return BenchRecord(
        op=str(case.op), backend=backend.name, size=case.size, count=case.count,
        dtype=str(case.dtype).removeprefix("torch."), n=case.n, world_size=backend.world_size,
        placement=case.placement, device_type=backend.device_type, timing=mode,
        time_us_median=stats.median_us, time_us_p99=stats.p99_us, algbw_gbps=algbw, busbw_gbps=busbw,
        wrong=wrong, iters=cfg.iters, warmup=cfg.warmup,
        reduce_op=str(case.reduce_op) if case.reduce_op is not None else None, root=case.root,
        devices=[str(d) for d in backend.devices], note=_note(backend, case),
    )


def run_points(points: Sequence[Point], backends: dict[str, Backend], cfg: BenchConfig,
               emit: Callable[[BenchRecord], None], *, combine: Combine | None = None,
               on_error: Callable[[Point, BaseException], None] | None = None,
               on_start: Callable[[Point], None] | None = None,
               on_skip: Callable[[Point, BaseException], None] | None = None) -> None:
    """Measure every point in order, emitting each row as soon as it exists.

    A one-process backend that raises on an op is reported through ``on_error`` once and skipped for
    the rest of that op's points; in a process group an error propagates (the other ranks are
    waiting in the same collective, so there is nothing sensible to continue with).  A point whose
    CUDA-graph capture fails goes to ``on_skip`` (every rank fails the same capture) and the rest of
    that op is skipped for that backend.
    """
    failed: set[tuple[str, str]] = set()
    for point in points:
        backend = backends[point.backend]
        key = (point.backend, str(point.case.op))
        if key in failed:
            continue
        if on_start is not None:
            on_start(point)
        try:
            record = measure(backend, point.case, cfg, combine)
        except GraphCaptureError as exc:
            failed.add(key)
            if on_skip is not None:
                on_skip(point, exc)
            continue
        except Exception as exc:
            if backend.process_group or on_error is None:
                raise
            failed.add(key)
            on_error(point, exc)
            continue
        finally:
            _release(backend)
        emit(record)


def _release(backend: Backend) -> None:
    if backend.device_type == "cuda":
        torch.cuda.empty_cache()
