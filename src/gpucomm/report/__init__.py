"""Reports: terminal tables, Markdown, self-contained HTML and plots — pure functions of records.

* :mod:`~gpucomm.report.findings` — the answer: per backend pair which ops are faster and by how much,
  and how far to trust it (``bench_answer``, the last lines of ``gpucomm bench``); the training strategy
  to pick and the equality verdict (``train_findings``, the last lines of ``gpucomm train``); the
  advisor's recommendation.  Commands and reports say the same words.
* :mod:`~gpucomm.report.terminal` — tables for the terminal (:func:`~gpucomm.report.terminal.bench_table`,
  ``train_table``, ``advice_table``, ``scale_table``) that fit whatever width they are printed at
  (:mod:`~gpucomm.report.fit`; the answer columns go last), cheap to build for a live display, and
  :class:`~gpucomm.report.terminal.Answer`, a command's closing lines wrapped to the terminal.
* :mod:`~gpucomm.report.docs` — the measured tables in ``docs/*.md``, generated from
  ``benchmarks/results/`` (``gpucomm report --doc docs/``) and checked stale in CI; one file per block
  kind in ``docs/kinds/``.
* :func:`build` (:mod:`~gpucomm.report.files`) — ``report.md``, ``report.html`` and ``plots/*.png|svg`` from one or more result
  directories; ``gpucomm report DIR [DIR …] [--out DIR]`` (:mod:`~gpucomm.report.cli`) runs it.

How a report is made: :mod:`~gpucomm.report.runs` finds the runs in the directories given and loads
each as a labelled run; :mod:`~gpucomm.report.content` turns the runs into a
:mod:`~gpucomm.report.document` (sections of paragraphs, tables and figures, drawn by
:mod:`~gpucomm.report.plots`), opening with the Findings section of :mod:`~gpucomm.report.overview`;
:mod:`~gpucomm.report.markdown`
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
