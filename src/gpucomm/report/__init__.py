"""Reports: terminal tables, Markdown, self-contained HTML and plots — pure functions of records.

* :mod:`~gpucomm.report.terminal` — tables for the terminal (:func:`~gpucomm.report.terminal.bench_table`,
  ``train_table``, ``advice_table``, ``scale_table``) that fit whatever width they are printed at
  (:mod:`~gpucomm.report.fit`), cheap to build for a live display.
* :mod:`~gpucomm.report.findings` — what a report says first: one sentence per op and backend pair,
  and the trust signals (wrong rows, noisy rows, CPU numbers).
* :mod:`~gpucomm.report.docs` — the measured tables in ``docs/*.md``, generated from
  ``benchmarks/results/`` (``gpucomm report --doc docs/``) and checked stale in CI; one file per block
  kind in ``docs/kinds/``.
* :func:`build` (:mod:`~gpucomm.report.files`) — ``report.md``, ``report.html`` and ``plots/*.png|svg`` from one or more result
  directories; ``gpucomm report DIR [DIR …] [--out DIR]`` (:mod:`~gpucomm.report.cli`) runs it.

How a report is made: :mod:`~gpucomm.report.runs` loads each directory as a labelled run;
:mod:`~gpucomm.report.content` turns the runs into a :mod:`~gpucomm.report.document` (sections of
paragraphs, tables and figures, drawn by :mod:`~gpucomm.report.plots`); :mod:`~gpucomm.report.markdown`
and :mod:`~gpucomm.report.html` lay that one document out, so both files say the same thing.
Number formats live in one place (``_format``).

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
        value = importlib.import_module("gpucomm.report.files").build
        globals()[name] = value
        return value
    raise AttributeError(f"module 'gpucomm.report' has no attribute {name!r}")
