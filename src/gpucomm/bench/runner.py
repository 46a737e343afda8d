"""The measurement loop: plan the points, and for each one warm up, time, check and build a row.

:func:`plan` enumerates the points of a run — op × dtype × reduction op × size × backend ×
placement × form, in that order, baselines first — so that rows of different backends for one size arrive
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
from gpucomm.bench.adapters import Adapter
from gpucomm.bench.backends import BACKENDS, GRAPH, PLAIN, PREPARED, Backend
from gpucomm.bench.buffers import BufferSet, Case, allocate, fill, plan_case, planned_nbytes
from gpucomm.bench.check import count_wrong, expected
from gpucomm.bench.config import BenchConfig
from gpucomm.collectives.spec import Invocation
from gpucomm.records import BenchRecord

__all__ = ["ROTATE_BYTES", "GraphCaptureError", "Point", "measure", "plan", "rotation_sets", "run_points",
           "unsupported_reasons"]

ROTATE_BYTES = {"cuda": 256 << 20, "cpu": 32 << 20}
"""Bytes of buffers a row rotates through, at least (docs/performance.md §3.1)."""
_MAX_SETS = 8

Combine = Callable[[list[float], int], tuple[list[float], int]]
"""Combines one rank's (iteration times, #wrong) with the other ranks' (max, sum)."""


class GraphCaptureError(RuntimeError):
    """A backend's op could not be captured into a CUDA graph: the point is skipped, not failed."""


@dataclasses.dataclass(frozen=True, slots=True)
class Point:
    """One row to measure: a backend, a case and a form ("plain" or "prepared")."""

    backend: str
    case: Case
    form: str = PLAIN


Forms = dict[str, tuple[str, ...]]
"""Backend name → the forms it offers in this run (an adapter's ``forms``, once built)."""


def plan(cfg: BenchConfig, backends: Sequence[Backend], n: int, forms: Forms | None = None) -> list[Point]:
    """Every point of the run for these backends with ``n`` participants, in measuring order.

    ``forms`` narrows a backend's forms to those its built adapter offers (a library without
    ``prepare`` measures plain calls only).
    """
    points: list[Point] = []
    seen: set[tuple[str, Case, str]] = set()
    for op in cfg.ops:
        spec = collectives.get(op)
        for dtype in cfg.dtypes:
            for rop in cfg.reduce_ops if spec.reduces else (None,):
                for size in cfg.sizes:
                    for b in backends:
                        if b.unsupported(op, dtype, rop, cfg.device_type):
                            continue
                        offered = [f for f in (forms or {}).get(b.name, b.forms)
                                   if not (f == GRAPH and cfg.timing == timing.CUDA_GRAPH)]  # no nested capture
                        for placement in b.placements_for(op):
                            case = plan_case(op, size, n, dtype, rop, placement, cfg.root)
                            for form in (f for f in b.forms if f in offered):
                                if case is not None and (b.name, case, form) not in seen:
                                    seen.add((b.name, case, form))
                                    points.append(Point(b.name, case, form))
    return points


def unsupported_reasons(cfg: BenchConfig, backends: Sequence[Backend], forms: Forms | None = None) -> list[str]:
    """One line per (backend, reason) that leaves points out of the run, for the run's preamble."""
    lines: dict[str, None] = {}
    for b in backends:
        missing = [f for f in b.forms if f not in (forms or {}).get(b.name, b.forms)]
        if PREPARED in missing:
            lines[f"{b.name}: prepared form not measured (its library has no prepare())"] = None
    for op in cfg.ops:
        rops = cfg.reduce_ops if collectives.get(op).reduces else (None,)
        for b in backends:
            for dtype in cfg.dtypes:
                for rop in rops:
                    reason = b.unsupported(op, dtype, rop, cfg.device_type)
                    if reason:
                        lines[f"{b.name}: {reason}"] = None
    return list(lines)


def rotation_sets(case: Case, participants: Sequence[int], device_type: str, mode: str) -> int:
    """Buffer sets a row of ``case`` rotates through when ``participants`` are held in one process.

    Enough sets to cover :data:`ROTATE_BYTES` (so that timed calls do not find their data in cache), at
    most 8 (and at most a graph's ops under cuda-graph timing).
    """
    per_set = max(1, planned_nbytes(case, list(participants)))
    sets = math.ceil(ROTATE_BYTES.get(device_type, ROTATE_BYTES["cpu"]) / per_set)
    return max(1, min(_MAX_SETS, sets, timing.GRAPH_OPS if mode == timing.CUDA_GRAPH else _MAX_SETS))


def _rotation(case: Case, backend: Adapter, mode: str) -> int:
    return rotation_sets(case, backend.participants, backend.device_type, mode)


def _check(backend: Adapter, case: Case, bufs: BufferSet, inv: Invocation, call, cfg: BenchConfig) -> int:
    """#wrong over ``cfg.check`` fresh runs of the timed ``call`` on ``bufs`` (-1 when checking is off)."""
    if cfg.check == 0:
        return -1
    graph_outputs: list = []
    graph = None
    if cfg.timing == timing.CUDA_GRAPH:  # check the graph path itself: replay a one-op graph
        try:
            graph = timing.GraphTimer(backend.devices[0]).capture(
                lambda _i: graph_outputs.append(call()), ops=1, warmup=0)
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
            returned = call()
        backend.synchronize()
        outputs = backend.outputs(case, bufs, inv, returned)
        for k, p in enumerate(backend.participants):
            want = expected(case.op, p, n=case.n, count=case.count, dtype=case.dtype,
                            reduce_op=case.reduce_op, root=case.root or 0, device=backend.devices[k])
            if want is not None:
                wrong += count_wrong(outputs[k], want, case.reduce_op)
    _checks.release()
    return wrong


def measure(backend: Adapter, case: Case, cfg: BenchConfig, combine: Combine | None = None,
            form: str = PLAIN) -> BenchRecord:
    """Warm up, time and check one point in ``form`` (docs/performance.md §3, §5); returns its row.

    The correctness check runs the very callable that was timed (the prepared one, for "prepared").
    """
    mode = cfg.timing
    sets = [allocate(case, backend.participants, backend.devices) for _ in range(_rotation(case, backend, mode))]
    for bufs in sets:
        fill(case, bufs, backend.participants)

    invocations = [backend.invocation(case, bufs) for bufs in sets]
    try:
        calls = [backend.bind(inv, form) for inv in invocations]
    except Exception as exc:
        if form != GRAPH:
            raise
        raise GraphCaptureError(f"{type(exc).__name__}: {exc}") from exc  # the graph form is skipped, not failed

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
    wrong = _check(backend, case, sets[0], invocations[0], calls[0], cfg)
    if combine is not None:
        times, wrong = combine(times, wrong)
    return _record(backend, case, cfg, mode, times, wrong, form)


def _note(backend: Adapter, case: Case, form: str) -> str:
    notes = []
    if case.n == 1:
        # nccl-tests' formulas still apply, but with one participant nothing crosses a link: a
        # rooted op's busbw (factor 1) is then a launch rate, not a bandwidth, and must not be read as one.
        notes.append("one participant: no data crosses a link; bandwidths are not link figures")
    row_note = collectives.get(case.op).calls.notes.get(backend.spec.library)
    if row_note:
        notes.append(row_note)
    base = BACKENDS.get(backend.spec.baseline) if backend.spec.baseline else None
    if form != PLAIN and base is not None and base.device_type in (None, backend.device_type):  # it ran: a ratio
        how = "prepared (checked once)" if form != GRAPH else "prepared and replayed from a CUDA graph"
        notes.append(f"{how} vs {backend.spec.baseline}'s plain call")
    return "; ".join(notes)


def _record(backend: Adapter, case: Case, cfg: BenchConfig, mode: str, times: list[float],
            wrong: int, form: str = PLAIN) -> BenchRecord:
    stats = metrics.summarize(times)
    algbw, busbw = metrics.bandwidths(case.op, case.size, case.n, stats.median_us)
    return BenchRecord(
        op=str(case.op), backend=backend.name, size=case.size, count=case.count,
        dtype=str(case.dtype).removeprefix("torch."), n=case.n, world_size=backend.world_size,
        placement=case.placement, device_type=backend.device_type, timing=mode,
        time_us_median=stats.median_us, time_us_p99=stats.p99_us, algbw_gbps=algbw, busbw_gbps=busbw,
        wrong=wrong, iters=cfg.iters, warmup=cfg.warmup,
        reduce_op=str(case.reduce_op) if case.reduce_op is not None else None, root=case.root,
        devices=[str(d) for d in backend.devices], note=_note(backend, case, form), form=form,
    )


def run_points(points: Sequence[Point], backends: dict[str, Adapter], cfg: BenchConfig,
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
        key = (point.backend, str(point.case.op), point.form)
        if key in failed:
            continue
        if on_start is not None:
            on_start(point)
        try:
            record = measure(backend, point.case, cfg, combine, point.form)
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


def _release(backend: Adapter) -> None:
    if backend.device_type == "cuda":
        torch.cuda.empty_cache()
