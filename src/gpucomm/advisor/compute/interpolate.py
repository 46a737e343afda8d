"""Interpolation over a ragged grid of measured points, in log space, one coordinate after another.

A compute profile measures a quantity (a per-FLOP time, a fraction) at points of a grid that need not be
rectangular: each tensor-parallel size has its own hidden sizes, each hidden size its own token counts (the
shapes a real search visits, and what fits on the GPU).  :func:`nested` reads such a grid as a tree — the
first coordinate's values, under each the points that share it, and so on — and interpolates from the leaves
up: along the last coordinate within each branch, then along the one before between the branches' answers.

Along one coordinate, with ``x`` the coordinate's logarithm:

* between two measured values: linear in ``x`` (a power law between neighbouring points when the quantity is
  itself a logarithm, as the profile stores per-FLOP times);
* exactly at a measured value: that branch's answer, so a measured point is looked up as it was measured;
* outside the measured range: the end value (``hold``: a per-FLOP time that has saturated) or the end
  segment continued (``extend``: a per-FLOP time that keeps rising below the smallest shape), and in either
  case a line saying which coordinate, the value asked and the measured range — the lookup is *extrapolated*.

Nothing here imports torch.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

__all__ = ["Axis", "GridError", "nested"]


class GridError(ValueError):
    """No measured point to interpolate from (one line naming what was asked and what the profile holds)."""


@dataclass(frozen=True, slots=True)
class Axis:
    """One coordinate of a grid: its name, and what to do outside the measured range."""

    name: str
    below: str = "extend"
    """"extend" (continue the first segment) or "hold" (the first value)."""
    above: str = "hold"
    """"extend" or "hold" beyond the last value."""


def _along(axis: Axis, x: float, xs: Sequence[float], ys: Sequence[float]) -> tuple[float, str | None]:
    """Interpolate ``ys`` over ``xs`` (sorted, distinct, both already in log space) at ``x``."""
    if len(xs) == 1:
        return ys[0], (None if math.isclose(x, xs[0], rel_tol=0, abs_tol=1e-9) else "one")
    if x < xs[0] - 1e-9:
        if axis.below == "hold":
            return ys[0], "below"
        return ys[0] + (ys[1] - ys[0]) * (x - xs[0]) / (xs[1] - xs[0]), "below"
    if x > xs[-1] + 1e-9:
        if axis.above == "hold":
            return ys[-1], "above"
        return ys[-1] + (ys[-1] - ys[-2]) * (x - xs[-1]) / (xs[-1] - xs[-2]), "above"
    i = bisect.bisect_left(xs, x - 1e-9)
    if math.isclose(x, xs[i], rel_tol=0, abs_tol=1e-9):
        return ys[i], None
    return ys[i - 1] + (ys[i] - ys[i - 1]) * (x - xs[i - 1]) / (xs[i] - xs[i - 1]), None


def nested(points: Sequence[tuple[Sequence[float], float]], axes: Sequence[Axis], query: Sequence[float],
           what: str, fmt: Callable[[float], str] = lambda v: f"{v:g}") -> tuple[float, tuple[str, ...]]:
    """The value at ``query`` from ``points`` (``(coordinates, value)``, coordinates > 0 in the order of
    ``axes``), and the extrapolation notes (empty when the query lies inside the measured grid).

    Raises:
        GridError: no points at all.
    """
    if not points:
        raise GridError(f"{what}: the profile holds no measured point to look this up from")
    notes: list[str] = []
    value = _nested(list(points), list(axes), list(query), 0, what, fmt, notes)
    return value, tuple(dict.fromkeys(notes))


def _needed(x: float, xs: list[float]) -> list[int]:
    """Indices of the measured values a lookup at ``x`` reads (the bracketing pair, or the end pair)."""
    if len(xs) == 1:
        return [0]
    i = bisect.bisect_left(xs, x - 1e-9)
    if i < len(xs) and math.isclose(x, xs[i], rel_tol=0, abs_tol=1e-9):
        return [i]
    if i == 0:
        return [0, 1]
    if i == len(xs):
        return [len(xs) - 2, len(xs) - 1]
    return [i - 1, i]


def _nested(points, axes, query, depth, what, fmt, notes) -> float:
    axis = axes[depth]
    groups: dict[float, list] = {}
    for coords, v in points:
        groups.setdefault(float(coords[depth]), []).append((coords, v))
    keys = sorted(groups)
    q = float(query[depth])
    xs_all = [math.log(k) for k in keys]
    use = _needed(math.log(q), xs_all)
    if depth + 1 == len(axes):
        ys = [statistics_mean([v for _, v in groups[keys[i]]]) for i in use]
    else:
        ys = [_nested(groups[keys[i]], axes, query, depth + 1, what, fmt, notes) for i in use]
    value, side = _along(axis, math.log(q), [xs_all[i] for i in use], ys)
    if side is not None:
        measured = fmt(keys[0]) if len(keys) == 1 else f"{fmt(keys[0])}-{fmt(keys[-1])}"
        notes.append(f"{what}: {axis.name} {fmt(q)} outside the measured {measured}")
    return value


def statistics_mean(values: list[float]) -> float:
    """Repeated measurements of one point count once, at their mean."""
    return sum(values) / len(values)
