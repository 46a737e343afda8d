"""Reports: terminal tables, Markdown, self-contained HTML and plots — pure functions of records.

* :mod:`gpucomm.report.terminal` — ``rich`` tables (:func:`~gpucomm.report.terminal.bench_table`, …),
  cheap enough to redraw in a live display.
* :func:`build` — ``report.md``, ``report.html`` and plot files from one or more result directories.

Everything here reads records through :func:`gpucomm.records.load` and nothing else.  Heavy imports
(matplotlib, Jinja2) happen only when :func:`build` runs, so ``gpucomm bench`` can use the terminal
tables without paying for them.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["build"]


def __getattr__(name: str) -> Any:
    if name == "build":
        value = importlib.import_module("gpucomm.report.build").build
        globals()[name] = value
        return value
    raise AttributeError(f"module 'gpucomm.report' has no attribute {name!r}")
