"""A run's answer: bench, then train, then advice lines."""

from __future__ import annotations

from report_records import advice_rows, bench_sweep, train_rows

from gpucomm.records import ResultSet
from gpucomm.report.findings import advice_findings, answer, bench_answer, train_findings


def test_each_kind_of_row_says_its_part_in_order():
    results = ResultSet(bench=bench_sweep(), train=train_rows(), advice=advice_rows())
    assert answer(results) == (bench_answer(results.bench) + train_findings(results.train)
                               + advice_findings(results.advice))
    assert answer(results)[0].startswith("answer: 32 rows")
    assert answer(ResultSet()) == []
