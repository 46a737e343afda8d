"""Measured tables in ``docs/*.md``, generated from the results files they quote — and checked stale.

How to use it (for every doc owner)
===================================

1. Put the measurement in a results file under ``benchmarks/results/`` named
   ``<theme>_<hardware>_<date>.<ext>`` (a bench/train result directory, a ``.jsonl``, a ``.md`` table) that
   says the command that produced it.
2. In the doc, where the table goes, write the two markers and nothing between them::

       <!-- generated: bench-pairs from benchmarks/results/bench_h200x1_2026-12-02 -->
       <!-- end generated -->

   ``bench-pairs`` is a block kind (``python -m gpucomm.report.docs --kinds`` lists them).  Options follow
   the path as ``key=value`` words, e.g. ``ops=broadcast,scatter``; a kind refuses options it does not know.
3. Run ``python -m gpucomm.report.docs`` (or ``gpucomm report --doc docs/``): every block is
   rewritten from its file.  ``--check`` rewrites nothing and exits 1 when a block is stale, which is
   what ``tests/docs/test_generated.py`` runs in CI.
4. Prose that quotes a measured figure carries a link ``[...](../benchmarks/results/FILE)`` in the same
   paragraph, and the number appears, as written, in one of the files that paragraph links
   (:mod:`~gpucomm.report.docs.prose` says exactly what counts).  Derived figures (a percentage change, a
   range over rows) belong in a generated block, not in prose.  The rule applies to every doc that has at
   least one generated block.

Adding a block kind: add one file to ``gpucomm/report/docs/kinds/`` named after the kind
(``my_kind.py`` for ``my-kind``) that defines ``render(path, options) -> str`` (Markdown, from the results
file and nothing else) and ``KIND = Kind("my-kind", "what it reads", render)``.  It is found at import.

The parts: :mod:`~gpucomm.report.docs.engine` (markers, render, regenerate, check),
:mod:`~gpucomm.report.docs.prose` (the figure check), :mod:`~gpucomm.report.docs.kinds` (the block kinds),
:mod:`~gpucomm.report.docs.cli` (the command line).
"""

from __future__ import annotations

from gpucomm.report.docs.cli import main, run
from gpucomm.report.docs.engine import Block, blocks, check, regenerate, render
from gpucomm.report.docs.kinds import KINDS
from gpucomm.report.docs.prose import prose_problems
from gpucomm.report.docs.spec import DocError, Kind

__all__ = ["KINDS", "Block", "DocError", "Kind", "blocks", "check", "main", "prose_problems", "regenerate", "render",
           "run"]
