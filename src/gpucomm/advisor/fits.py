"""Measured collective costs: the measured points themselves, and ``t = alpha + beta * S`` per (op, participant
count, scope, size band) beyond them.

Calibration (:mod:`gpucomm.advisor.calibrate`) produces these from bench records; prediction
(:mod:`gpucomm.advisor.timing`) reads them through :func:`collective_time_s`.  Both import this module and
neither imports the other's internals for it, so the advisor's import graph has no cycle.

Between two measured sizes of the same (op, n, scope) the time is interpolated linearly, so a calibrated
profile reproduces every size it was measured at exactly (issue 16: calibration reproduces its inputs);
outside the measured range the band fit (NCCL switches protocol by size) extrapolates.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["CollectiveFit", "collective_fit", "collective_time_s", "interpolate"]


@dataclass(frozen=True, kw_only=True, slots=True)
class CollectiveFit:
    """``t = alpha + beta * S`` for one op, participant count, scope and size band."""

    op: str
    n: int
    scope: str
    """"process" (multi-process backends) or "local" (one process, many devices)."""
    band: str
    lo: float
    """Smallest size (bytes, inclusive) the fit applies to."""
    hi: float
    """Largest size (bytes, exclusive); ``inf`` for the top band."""
    alpha_us: float
    beta_us_per_byte: float
    points: int
    max_rel_err: float
    """Largest relative residual of the fit on its own points."""

    def time_s(self, nbytes: float) -> float:
        return (self.alpha_us + self.beta_us_per_byte * nbytes) * 1e-6


def collective_fit(fits: Sequence[CollectiveFit], op: str, n: int, nbytes: float,
                   scope: str) -> CollectiveFit | None:
    """The fit for exactly (op, n) covering ``nbytes``, preferring ``scope``; else None."""
    for want in (scope, "process" if scope == "local" else "local"):
        cands = [f for f in fits if f.op == op and f.n == n and f.scope == want]
        for f in cands:
            if f.band != "all" and f.lo <= nbytes < f.hi:
                return f
        for f in cands:
            if f.band == "all":
                return f
    return None


def interpolate(points: Sequence[Sequence[float]], x: float) -> float | None:
    """Linear interpolation of ``(x, y)`` points sorted by x; None outside ``[x_first, x_last]``."""
    if not points or x < points[0][0] or x > points[-1][0]:
        return None
    for (x0, y0), (x1, y1) in zip(points[:-1], points[1:], strict=True):
        if x0 <= x <= x1:
            return y0 if x1 == x0 else y0 + (y1 - y0) * (x - x0) / (x1 - x0)
    return points[-1][1]


def collective_time_s(calibration: dict | None, op: str, n: int, nbytes: float, scope: str) -> float | None:
    """Seconds for one collective from a calibration: the measured points of exactly (op, n), preferring
    ``scope`` (interpolated inside their range), else the band fit; None when nothing was measured."""
    if not calibration:
        return None
    for want in (scope, "process" if scope == "local" else "local"):
        for row in calibration.get("collective_points", []):
            if row["op"] == op and row["n"] == n and row["scope"] == want:
                t = interpolate(row["points"], nbytes)
                if t is not None:
                    return t * 1e-6
    fits = [f if isinstance(f, CollectiveFit) else CollectiveFit(**f) for f in calibration.get("collectives", [])]
    fit = collective_fit(fits, op, n, nbytes, scope)
    return None if fit is None else max(0.0, fit.time_s(nbytes))
