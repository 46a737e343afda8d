"""A run's answer: everything its records let us say first, in the order a reader asks for it.

Bench rows give :func:`~gpucomm.report.findings.bench.bench_answer` (how far to trust the numbers, then
per backend pair which ops are faster and by how much), train rows
:func:`~gpucomm.report.findings.train.train_findings` (the strategy to pick, the equality verdict), advise
rows :func:`~gpucomm.report.findings.advice.advice_findings` (the recommendation).  A run that holds
several kinds says each.
"""

from __future__ import annotations

from gpucomm.records import ResultSet
from gpucomm.report.findings.advice import advice_findings
from gpucomm.report.findings.bench import bench_answer
from gpucomm.report.findings.train import train_findings

__all__ = ["answer"]


def answer(results: ResultSet) -> list[str]:
    """The run's answer lines: bench, then train, then advice (empty for a run without result rows)."""
    return bench_answer(results.bench) + train_findings(results.train) + advice_findings(results.advice)
