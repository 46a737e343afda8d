"""Will a bench run's buffers fit?  The bytes a run holds at its peak, per place, from the collective rows.

``gpucomm bench`` asks this before any work, so that a sweep whose buffers cannot exist is one line
(exit 2, nothing written) instead of minutes of a stuck row or the kernel's OOM killer.

A **place** is ``"host"`` — every CPU participant: the one-process backends' CPU slots and every gloo
rank, all processes on this machine — or a CUDA device (``"cuda:1"``).  For each point of the run the
bytes held at once are:

* the **rotating buffer sets** (:func:`gpucomm.bench.runner.rotation_sets`) times each participant's input
  and output as the collective's row declares them (``input_nbytes`` / ``output_nbytes``; in place, the
  larger of the two) — exactly what :func:`gpucomm.bench.buffers.allocate` makes;
* when checking (``-c`` > 0), the **check's reference**: a 64-bit copy of one participant's output
  (:func:`gpucomm.bench.check.expected` computes in float64/int64) — one participant at a time in one
  process, every rank at once in process groups.

Points run one after another and drop their buffers, and the one-process phase ends before the
process-group phase starts, so a run needs, at each place, its largest point's bytes.

This is a floor: allocator rounding, library workspaces (NCCL, pinned staging) and the check's smaller
temporaries come on top, so a run just under the limit may still fail.  A run far over it
(``gpucomm bench -e 100G`` on a 23 GiB machine) is refused at once, with what it needs and what is there.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import torch

from gpucomm import collectives
from gpucomm.bench.buffers import Case, planned_nbytes
from gpucomm.bench.config import BenchConfig
from gpucomm.bench.runner import Point, rotation_sets
from gpucomm.bench.sizes import format_size

__all__ = ["HOST", "Need", "available_bytes", "needs", "refusal"]

HOST = "host"
_REFERENCE_ITEMSIZE = 8  # check.expected's float64 / int64


@dataclasses.dataclass(frozen=True, slots=True)
class Need:
    """The bytes one point holds at one place, and what they are made of."""

    place: str
    nbytes: int
    point: Point
    participants: int
    """Participants (ranks, in process groups) whose buffers live at this place."""
    sets: int
    """Rotating buffer sets (the largest, where ranks differ)."""


def _reference_nbytes(case: Case, p: int) -> int:
    row = collectives.get(case.op)
    out = row.output_nbytes(case.size, case.n, is_root=p == (case.root or 0))
    return out // torch.empty((), dtype=case.dtype).element_size() * _REFERENCE_ITEMSIZE


def _place(device: torch.device) -> str:
    return str(device) if device.type == "cuda" else HOST


def _point_needs(point: Point, places: Sequence[str], cfg: BenchConfig, *, group: bool) -> list[Need]:
    """What ``point`` holds at each place; participant k lives at ``places[k]``."""
    case, check = point.case, cfg.check > 0
    buffers: dict[str, int] = {}
    reference: dict[str, int] = {}
    count: dict[str, int] = {}
    sets_at: dict[str, int] = {}
    local_sets = 0 if group else rotation_sets(case, range(case.n), cfg.device_type, cfg.timing)
    for p, place in enumerate(places):
        sets = rotation_sets(case, [p], cfg.device_type, cfg.timing) if group else local_sets
        buffers[place] = buffers.get(place, 0) + sets * planned_nbytes(case, [p])
        ref = _reference_nbytes(case, p) if check else 0
        # one process checks its participants one at a time; ranks check at once
        reference[place] = reference.get(place, 0) + ref if group else max(reference.get(place, 0), ref)
        count[place] = count.get(place, 0) + 1
        sets_at[place] = max(sets_at.get(place, 0), sets)
    return [Need(place=pl, nbytes=buffers[pl] + reference[pl], point=point, participants=count[pl],
                 sets=sets_at[pl]) for pl in buffers]


def needs(cfg: BenchConfig, local_points: Sequence[Point], group_points: Sequence[Point]) -> list[Need]:
    """Every point's need at every place it touches (one-process points on ``cfg.devices``; process-group
    points with rank r on ``cuda:r``, or on the host for gloo)."""
    local_places = [_place(d) for d in cfg.devices]
    group_places = [f"cuda:{r}" if cfg.device_type == "cuda" else HOST for r in range(cfg.nproc)]
    out: list[Need] = []
    for point in local_points:
        out += _point_needs(point, local_places, cfg, group=False)
    for point in group_points:
        out += _point_needs(point, group_places, cfg, group=True)
    return out


def available_bytes(place: str) -> int:
    """Bytes free for new buffers at ``place``: the host's available memory (``psutil``), or the CUDA
    device's free memory (``torch.cuda.mem_get_info``)."""
    if place == HOST:
        import psutil

        return int(psutil.virtual_memory().available)
    free, _total = torch.cuda.mem_get_info(torch.device(place))
    return int(free)


def _gib(nbytes: int) -> str:
    return f"{nbytes / 2**30:.1f} GiB"


def _flag_size(nbytes: int) -> str:
    for suffix, shift in (("G", 30), ("M", 20), ("K", 10)):
        if nbytes >= 1 << shift and nbytes % (1 << shift) == 0:
            return f"{nbytes >> shift}{suffix}"
    return str(nbytes)


def _largest_size_that_fits(cfg: BenchConfig, all_needs: list[Need], free: dict[str, int]) -> int | None:
    for size in sorted(cfg.sizes, reverse=True):
        if all(n.nbytes <= free[n.place] for n in all_needs if n.point.case.size <= size):
            return size
    return None


def refusal(cfg: BenchConfig, local_points: Sequence[Point], group_points: Sequence[Point], *,
            available: Callable[[str], int] | None = None) -> str | None:
    """One line saying why this run's buffers cannot fit (what the worst point needs, what is there,
    and the largest ``--maxbytes`` that fits), or None when they fit.

    ``available(place)`` gives a place's free bytes (default :func:`available_bytes`).
    """
    available = available or available_bytes
    all_needs = needs(cfg, local_points, group_points)
    free = {place: available(place) for place in dict.fromkeys(n.place for n in all_needs)}
    over = [n for n in all_needs if n.nbytes > free[n.place]]
    if not over:
        return None
    worst = max(over, key=lambda n: n.nbytes / max(free[n.place], 1))
    case = worst.point.case
    where = "host memory" if worst.place == HOST else f"{worst.place}'s memory"
    has = "available" if worst.place == HOST else "free"
    who = "ranks" if worst.point in group_points else "participants"
    parts = f"{worst.participants} {who}' buffers × {worst.sets} rotating set{'s' * (worst.sets != 1)}"
    if cfg.check > 0:
        parts += " and the check's 64-bit reference"
    fit = _largest_size_that_fits(cfg, all_needs, free)
    fix = (f"lower --maxbytes to {_flag_size(fit)} or less" if fit is not None
           else "lower --minbytes and --maxbytes")
    return (f"--maxbytes: {case.op} on {worst.point.backend} ({case.placement}) at "
            f"{format_size(case.size)} needs {_gib(worst.nbytes)} of {where} ({parts}), but {_gib(free[worst.place])} "
            f"is {has}; {fix}, or use fewer --devices/--nproc")
