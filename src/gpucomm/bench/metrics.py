"""Statistics and derived metrics of one bench row (``docs/performance.md`` §2, §3.5, §6).

* :func:`median`, :func:`percentile` — linear interpolation between order statistics (NumPy's default).
* :func:`bandwidths` — algbw and busbw through :mod:`gpucomm.collectives`, the one spec table.
* :func:`assign_speedups` — ``t_baseline / t`` per (op, size, dtype, reduction op, timing mode), the
  baseline being the backend's own (:attr:`gpucomm.bench.backends.Backend.baseline`), called plainly.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Sequence

from gpucomm import collectives
from gpucomm.bench.backends import PLAIN, baseline_of
from gpucomm.records import BenchRecord

__all__ = ["SpeedupIndex", "TimeStats", "assign_speedups", "bandwidths", "median", "percentile", "summarize"]


@dataclasses.dataclass(frozen=True, slots=True)
class TimeStats:
    """Median and 99th percentile of per-iteration times, microseconds."""

    median_us: float
    p99_us: float


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0..100) by linear interpolation between order statistics."""
    if not values:
        raise ValueError("percentile: expected at least one value, but got none")
    if not 0 <= q <= 100:
        raise ValueError(f"percentile: expected 0 <= q <= 100, but got {q}")
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def median(values: Sequence[float]) -> float:
    """The median (the 50th percentile; the mean of the two middle values for an even count)."""
    return percentile(values, 50)


def summarize(seconds: Sequence[float]) -> TimeStats:
    """Per-iteration times in seconds → median and p99 in microseconds."""
    return TimeStats(median_us=median(seconds) * 1e6, p99_us=percentile(seconds, 99) * 1e6)


def bandwidths(op: str, size: int, n: int, median_us: float) -> tuple[float, float]:
    """(algbw, busbw) in GB/s for ``size`` bytes among ``n`` participants at ``median_us``."""
    spec = collectives.get(op)
    seconds = median_us / 1e6
    return spec.algbw(size, seconds), spec.busbw(size, seconds, n)


def _key(r: BenchRecord) -> tuple:
    return (r.op, r.size, r.dtype, r.reduce_op, r.timing, r.device_type, r.n)


class SpeedupIndex:
    """Fills ``baseline`` and ``speedup`` into rows as they arrive (baseline rows must come first).

    The baseline row is the baseline backend's *plain* call with the same op, size, dtype, reduction
    op, timing mode, device type and n (a prepared row is thus compared with the raw library as users
    call it); the same placement is preferred, otherwise the baseline's first placement is used and the
    row's note says which.  Rows whose baseline backend did not measure that point keep ``speedup=None``.
    """

    def __init__(self) -> None:
        self._rows: dict[tuple, dict[str, BenchRecord]] = {}

    def apply(self, r: BenchRecord) -> BenchRecord:
        """Remember ``r`` (it may be a baseline) and return it with its ratio filled in where possible."""
        self._rows.setdefault((*_key(r), r.backend, r.form), {}).setdefault(r.placement, r)
        base_name = baseline_of(r.backend)
        candidates = self._rows.get((*_key(r), base_name, PLAIN), {}) if base_name else {}
        base = candidates.get(r.placement) or next(iter(candidates.values()), None)
        if base is None or not (base.time_us_median > 0 and r.time_us_median > 0):
            return r
        note = r.note
        if base.placement != r.placement:
            extra = f"speedup vs {base_name} {base.placement}"
            note = f"{note}; {extra}" if note else extra
        return dataclasses.replace(r, baseline=base_name, speedup=base.time_us_median / r.time_us_median,
                                   note=note)


def assign_speedups(records: Iterable[BenchRecord]) -> list[BenchRecord]:
    """Copies of ``records`` with ``baseline`` and ``speedup`` filled in (see :class:`SpeedupIndex`).

    Baseline rows are indexed first, so the order of ``records`` does not matter here.
    """
    records = list(records)
    index = SpeedupIndex()
    for r in records:
        if baseline_of(r.backend) == r.backend and r.form == PLAIN:
            index.apply(r)
    return [index.apply(r) for r in records]
