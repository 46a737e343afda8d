"""What a report — and every command's last lines — says first: the answer, and how far to trust it.

* :mod:`~gpucomm.report.findings.bench` — per op and backend pair, which is faster, by how much, over which
  sizes, and how many rows were too noisy to say: :func:`bench_answer` in full (the report's), :func:`bench_glance`
  in at most five screen lines (``gpucomm bench``'s last lines).
* :mod:`~gpucomm.report.findings.train` — :func:`train_findings`: the strategy to pick and the equality verdict
  (:func:`train_glance`: ``gpucomm train``'s last lines).
* :mod:`~gpucomm.report.findings.advice` — :func:`advice_findings`: the recommendation and its margin.
* :func:`answer` — all three for one run's records: what a report opens with, per run (:func:`answer_glance`:
  each at most five screen lines, for a terminal).
* :mod:`~gpucomm.report.findings.glance` — the five-screen-line bound and the one wrapping rule.

Each reads records and nothing else, and imports neither rich nor matplotlib, so a command can print its
answer without paying for the report.
"""

from __future__ import annotations

from gpucomm.report.findings.advice import advice_findings
from gpucomm.report.findings.answer import answer, answer_glance
from gpucomm.report.findings.bench import (
    EVEN,
    NOISY,
    PairFinding,
    bench_answer,
    bench_findings,
    bench_glance,
    is_noisy,
    noisy_rows,
    pair_findings,
    pair_sentences,
    trust_sentences,
)
from gpucomm.report.findings.train import train_findings, train_glance

__all__ = [
    "EVEN",
    "NOISY",
    "PairFinding",
    "advice_findings",
    "answer",
    "answer_glance",
    "bench_answer",
    "bench_findings",
    "bench_glance",
    "is_noisy",
    "noisy_rows",
    "pair_findings",
    "pair_sentences",
    "train_findings",
    "train_glance",
    "trust_sentences",
]
