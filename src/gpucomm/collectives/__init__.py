"""The collective table: each collective defined once, as data, one file per collective.

Everything that needs to know what a collective *is* reads this package: ``gpucomm.comm`` and
``gpucomm.dist`` (output shapes), ``gpucomm bench`` (buffers, expected results, each library's call,
algbw and busbw), ``gpucomm report`` (the busbw legend) and ``gpucomm advise`` (ring steps and bytes on
the wire).  Nobody else dispatches on op-name strings to get these facts.

Adding a collective = adding one file here that defines ``ROW`` (a :class:`Collective`; see
:mod:`gpucomm.collectives.spec`), plus its kernel.  The files are found when this package is imported
and ordered by ``ROW.order``; :class:`CollectiveName` is built from them.

Sizes follow nccl-tests (``doc/PERFORMANCE.md``): ``size`` is the larger of one participant's send and
receive buffers, in bytes; ``algbw = size / t``; ``busbw = algbw × factor(n)`` with factor ``2(n-1)/n``
for all_reduce, ``(n-1)/n`` for all_gather, reduce_scatter, all_to_all, scatter and gather, ``1`` for
broadcast, reduce and send_recv; ``n`` is the number of participants.
"""

from __future__ import annotations

import dataclasses
import enum
import importlib
import pkgutil

from gpucomm.collectives.spec import Collective, Factor, ReduceOp, parse_op

__all__ = [
    "COLLECTIVES",
    "Collective",
    "CollectiveName",
    "Factor",
    "ReduceOp",
    "get",
    "names",
    "parse_op",
]


class _Name(str, enum.Enum):
    def __str__(self) -> str:
        return self.value


def _discover() -> list[Collective]:
    """Every ``ROW`` defined by a module of this package, in ``order``."""
    rows = []
    for info in pkgutil.iter_modules(__path__):
        if info.name == "spec" or info.name.startswith("_"):
            continue
        row = getattr(importlib.import_module(f"{__name__}.{info.name}"), "ROW", None)
        if isinstance(row, Collective):
            rows.append(row)
    return sorted(rows, key=lambda r: (r.order, r.name))


_ROWS = _discover()

CollectiveName = _Name("CollectiveName", [(r.name.upper(), r.name) for r in _ROWS], module=__name__)
CollectiveName.__doc__ = "Names of the collectives, as they appear in records, CLI flags and JSON (one per row)."

COLLECTIVES: dict[CollectiveName, Collective] = {
    CollectiveName(r.name): dataclasses.replace(r, name=CollectiveName(r.name)) for r in _ROWS
}
"""Every collective's row by name, in table order."""


def get(name: str | CollectiveName) -> Collective:
    """Look a collective up by name; a clear ``ValueError`` lists the valid names otherwise."""
    try:
        return COLLECTIVES[CollectiveName(name)]
    except ValueError:
        valid = ", ".join(c.value for c in CollectiveName)
        raise ValueError(f"unknown collective {name!r}; expected one of: {valid}") from None


def names() -> list[str]:
    """Every collective's name, in table order."""
    return [c.value for c in COLLECTIVES]
