"""The Findings section: each run's answer first, then the ops × pairs summary, the headline plots, the detail."""

from __future__ import annotations

from pathlib import Path

import pytest
from report_records import bench, env, train_rows

from gpucomm.records import ResultSet
from gpucomm.report import overview
from gpucomm.report.document import Answer, Figure, Paragraph, Section, Table
from gpucomm.report.runs import Run


@pytest.fixture(autouse=True)
def _no_drawing(monkeypatch):
    def fake(name):
        return lambda runs: Figure(name, name, b"", b"")

    monkeypatch.setattr(overview.plots, "headline_plot", fake("headline_speedup"))
    monkeypatch.setattr(overview.plots, "train_plot", fake("train"))


def _run(tag: str = "run 1", **kinds) -> Run:
    return Run(f"label {tag}", Path("."), ResultSet(env=[env()], **kinds), tag=tag)


def _pair(op, speedups, backend="gpucomm.comm", base="torch.cuda.comm", form="plain", noisy=()):
    rows = []
    for size, speedup in speedups.items():
        row = bench(op, backend, size, time_us=10.0 / speedup, speedup=speedup, baseline=base)
        row.form = form
        if size in noisy:
            row.time_us_p99 = row.time_us_median * 10
        rows += ([bench(op, base, size)] if form == "plain" else []) + [row]
    return rows


def test_summary_cells_say_speedup_verdict_where_and_trust():
    rows = (_pair("gather", {8: 0.8, 1 << 20: 30.0, 1 << 26: 40.0}) + _pair("scatter", {8: 0.5, 1 << 10: 0.6})
            + _pair("gather", {8: 1.5, 1 << 20: 1.5}, form="prepared", noisy=(8,))
            + _pair("reduce", {8: 3.0}, noisy=(8,)))
    table = overview.summary_table([_run(bench=rows)])
    assert table.groups == [("", 1), ("gpucomm.comm vs torch.cuda.comm", 2)]
    assert table.headers == ["op", "plain", "prepared"]
    cells = {row[0]: row[1:] for row in table.rows}
    assert cells["gather"] == ["35.00x faster\nfrom 1 MiB up · ✓ 3/3 rows",
                               "1.50x faster\nat 1 MiB · ⚠ 1/2 rows (1 noisy)"]
    assert cells["scatter"] == ["0.55x slower\nall sizes · ✓ 2/2 rows", "—"]
    assert cells["reduce"] == ["too noisy to say\n⚠ 0/1 rows (1 noisy)", "—"]
    tones = {row[0]: t[1:] for row, t in zip(table.rows, table.tones, strict=True)}
    assert tones == {"gather": ["good", "good"], "scatter": ["bad", ""], "reduce": ["muted", ""]}


def test_several_runs_get_a_column_group_each():
    runs = [_run("run 1", bench=_pair("gather", {8: 2.0})), _run("run 2", bench=_pair("gather", {8: 0.5}))]
    table = overview.summary_table(runs)
    assert [g for g, _ in table.groups] == ["", "[run 1] gpucomm.comm vs torch.cuda.comm",
                                            "[run 2] gpucomm.comm vs torch.cuda.comm"]


def test_the_section_opens_with_the_answer_then_table_plots_and_detail():
    section = overview.findings_section([_run(bench=_pair("gather", {8: 2.0}), train=train_rows())])
    kinds = [type(b).__name__ for b in section.blocks]
    assert kinds[:4] == ["Answer", "Table", "Figure", "Figure"]
    (answer,) = [b for b in section.blocks if isinstance(b, Answer)]
    assert answer.title == "" and answer.head.startswith("2 rows, all checked correct")
    assert answer.lines[0].startswith("gpucomm.comm vs torch.cuda.comm: faster at gather 2.00x")
    assert any(line.startswith("Pick replicated") for line in answer.lines)
    detail = next(i for i, b in enumerate(section.blocks) if isinstance(b, Section))
    assert section.blocks[detail].title == "Findings in detail"
    assert all(isinstance(b, Paragraph) for b in section.blocks[detail + 1:])


def test_a_train_only_run_has_findings_too_and_several_runs_are_titled():
    section = overview.findings_section([_run("run 1", train=train_rows()), _run("run 2", bench=_pair("gather", {8: 2.0}))])
    answers = [b for b in section.blocks if isinstance(b, Answer)]
    assert [a.title for a in answers] == ["run 1: label run 1", "run 2: label run 2"]
    assert answers[0].lines[0].startswith("Pick replicated") and answers[0].head == ""
    assert answers[1].head.startswith("2 rows")
    assert isinstance(section.blocks[2], Table)


def test_no_result_rows_no_section():
    assert overview.findings_section([_run()]) is None


def test_a_bench_run_beside_a_train_run_needs_no_run_tag_in_its_table():
    runs = [_run("run 1", bench=_pair("gather", {8: 2.0})), _run("run 2", train=train_rows())]
    assert [g for g, _ in overview.summary_table(runs).groups] == ["", "gpucomm.comm vs torch.cuda.comm"]
