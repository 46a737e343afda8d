"""Fitted collective costs: ``t = alpha + beta * S`` per (op, participant count, scope, size band).

Calibration (:mod:`gpucomm.advisor.calibrate`) produces these from bench records; prediction
(:mod:`gpucomm.advisor.plan`) reads them.  Both import this module and neither imports the other's
internals for it, so the advisor's import graph has no cycle.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["CollectiveFit", "collective_fit"]


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
