"""The docs block kinds, one file each, found when this package is imported.

Adding a kind = adding one file here that defines ``KIND`` (a :class:`~gpucomm.report.docs.spec.Kind`)
and is named after it (``bench_pairs.py`` defines ``bench-pairs``).  Helpers shared by several kinds
live in ``_tables.py``; modules whose name starts with ``_`` are not kinds.
"""

from __future__ import annotations

import importlib
import pkgutil

from gpucomm.report.docs.spec import Kind

__all__ = ["KINDS", "Kind"]


def _discover() -> dict[str, Kind]:
    """Every ``KIND`` defined by a module of this package, by name (sorted)."""
    found: dict[str, Kind] = {}
    for info in pkgutil.iter_modules(__path__):
        if info.name.startswith("_"):
            continue
        kind = getattr(importlib.import_module(f"{__name__}.{info.name}"), "KIND", None)
        if not isinstance(kind, Kind):
            raise TypeError(f"{__name__}.{info.name}: expected a module-level KIND = Kind(...), but found "
                            f"{type(kind).__name__}; name helper modules with a leading underscore")
        if kind.name.replace("-", "_") != info.name:
            raise ValueError(f"{__name__}.{info.name}: defines kind {kind.name!r}; name the file "
                             f"{kind.name.replace('-', '_')}.py so that a marker's kind leads to its code")
        found[kind.name] = kind
    return dict(sorted(found.items()))


KINDS: dict[str, Kind] = _discover()
"""Every block kind by name."""
