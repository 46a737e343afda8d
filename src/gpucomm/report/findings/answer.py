"""A run's answer: everything its records let us say first, in the order a reader asks for it.

Bench rows give :func:`~gpucomm.report.findings.bench.bench_answer` (how far to trust the numbers, then
per backend pair which ops are faster and by how much), train rows
:func:`~gpucomm.report.findings.train.train_findings` (the strategy to pick, the equality verdict), advise
rows :func:`~gpucomm.report.findings.advice.advice_findings` (the recommendation, in the words ``advise``
printed when its records hold them).  A run that holds
several kinds says each.
"""

from __future__ import annotations

from gpucomm.records import ResultSet
from gpucomm.report.findings import glance
from gpucomm.report.findings.advice import advice_findings, said_answer
from gpucomm.report.findings.bench import bench_answer, bench_glance
from gpucomm.report.findings.train import train_findings, train_glance

__all__ = ["answer", "answer_glance"]


def answer(results: ResultSet) -> list[str]:
    """The run's answer lines: bench, then train, then advice (empty for a run without result rows)."""
    return (bench_answer(results.bench) + train_findings(results.train)
            + advice_findings(results.advice, said_answer(results.env)))


def answer_glance(results: ResultSet, width: int, *, more: str | None = "report.md") -> list[str]:
    """The run's answer for a terminal of ``width`` columns: each kind's at most five screen lines
    (:func:`~gpucomm.report.findings.bench.bench_glance`, :func:`~gpucomm.report.findings.train.train_glance`,
    the advice at the most detail that fits), the full lines being the report's."""
    advice = advice_findings(results.advice, said_answer(results.env))
    return (bench_glance(results.bench, width, more=more) + train_glance(results.train, width)
            + glance.fit([advice], width))
