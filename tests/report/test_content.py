"""gpucomm.report.content: records -> the report's Document (sections, banners, tables, legend).

The figures are replaced by empty ones here: their drawing is tested in test_plots.py, and this file
checks what the document says, not how plots look.
"""

import pytest
from report_records import bench, bench_sweep, env, train, train_rows, write

from gpucomm import collectives
from gpucomm.report import content
from gpucomm.report.document import KeyValues, Paragraph, Table
from gpucomm.report.runs import load_runs


@pytest.fixture(autouse=True)
def _no_figures(monkeypatch):
    monkeypatch.setattr(content.plots, "bench_plots", lambda runs, op: [])
    for name in ("train_plot", "scale_plot", "headline_plot"):
        monkeypatch.setattr(content.plots, name, lambda runs: None)


def doc_for(tmp_path, *dirs):
    return content.document(load_runs([write(tmp_path / name, e, rows) for name, e, rows in dirs]))


def section(doc, title):
    return next(s for s in doc.sections if s.title == title)


def test_sections_come_in_order_with_op_subsections(tmp_path):
    rows = bench_sweep() + [bench("all_reduce", "gpucomm.comm", 1 << 12, wrong=5, speedup=0.8,
                                  baseline="torch.cuda.comm")] + train_rows()
    doc = doc_for(tmp_path, ("gpu", env(), rows))
    assert [(s.title, s.level, s.anchor) for s in doc.sections] == [
        ("Findings", 2, "findings"), ("Findings in detail", 3, "findings-detail"), ("Wrong results", 2, "wrong"),
        ("Collectives", 2, "bench"), ("all_reduce", 3, "op-all_reduce"), ("all_gather", 3, "op-all_gather"),
        ("Training", 2, "train"), ("Runs", 2, "runs"), ("Units", 2, "units")]
    assert doc.title == "gpucomm report" and doc.subtitle.startswith("hostA")


def test_a_wrong_row_is_listed_flagged_and_announced(tmp_path):
    rows = bench_sweep() + [bench("all_reduce", "gpucomm.comm", 1 << 12, wrong=5)]
    doc = doc_for(tmp_path, ("gpu", env(), rows))
    assert [b.text for b in doc.banners] == ["1 bench row(s) returned WRONG results: see Wrong results."]
    wrong = section(doc, "Wrong results")
    (table,) = [b for b in wrong.blocks if isinstance(b, Table)]
    assert table.flags == ["wrong"]
    assert table.rows == [["all_reduce", "gpucomm.comm", "4 KiB", "float32", "sum", "2", "out-of-place",
                           "5 WRONG", "1024", ""]]
    assert table.headers[:3] == ["op", "backend", "size"]


def test_all_correct_and_unchecked_rows_are_counted(tmp_path):
    rows = [bench(size=1 << k) for k in (10, 12)] + [bench(size=1 << 14, wrong=-1)]
    doc = doc_for(tmp_path, ("gpu", env(), rows))
    texts = [(b.tone, b.text) for b in section(doc, "Wrong results").blocks]
    assert texts == [("ok", "No wrong results: all 2 checked bench rows matched the expected result."),
                     ("note", "1 bench row(s) were not checked (#wrong n/c).")]
    assert doc.banners == []


def test_training_that_matches_single_says_so(tmp_path):
    rows = [train("single", 1, 100.0), train("ddp", 2, 180.0), train("dp", 2, 150.0)]
    doc = doc_for(tmp_path, ("gpu", env(), rows))
    (para,) = section(doc, "Wrong results").blocks
    assert para.tone == "ok"
    assert para.text == ("Training: no failures; 2 strategy result(s) compared with single, "
                         "all equal within tolerance.")


def test_cpu_runs_get_a_banner_naming_them(tmp_path):
    cpu_rows = [r for r in bench_sweep("cpu") if r.op == "all_reduce"]
    only_cpu = doc_for(tmp_path / "a", ("cpu", env(device=None, device_type="cpu"), cpu_rows))
    assert only_cpu.banners[0].tone == "warning"
    assert only_cpu.banners[0].text.startswith("These are CPU numbers. All runs: measured on CPU")
    mixed = doc_for(tmp_path / "b", ("gpu", env(), bench_sweep()),
                    ("cpu", env(device=None, device_type="cpu"), cpu_rows))
    assert "These are CPU numbers. run 2 (" in mixed.banners[0].text and "run 1" not in mixed.banners[0].text
    assert mixed.subtitle.startswith("run 1: hostA") and " | run 2: " in mixed.subtitle


def test_an_env_only_run_has_just_runs_and_units():
    from pathlib import Path

    from gpucomm.records import ResultSet
    from gpucomm.report.runs import Run

    doc = content.document([Run("label", Path("."), ResultSet(env=[env()]))])  # load_runs refuses one; content copes
    assert [s.title for s in doc.sections] == ["Runs", "Units"]
    (units,) = section(doc, "Units").blocks
    assert isinstance(units, KeyValues) and units.mono is False and units.pairs == content.UNITS


def test_the_busbw_legend_is_derived_from_every_collective_row():
    legend = dict(content.UNITS)["busbw"]
    by_factor = {}
    for name in collectives.names():
        by_factor.setdefault(collectives.get(name).factor.value, []).append(str(name))
    for factor, ops in by_factor.items():
        assert f"{factor} for {', '.join(ops)}" in legend, factor
    assert legend.endswith(".")


def test_runs_section_names_each_run_and_its_directory(tmp_path):
    doc = doc_for(tmp_path, ("gpu", env(), bench_sweep()))
    first = section(doc, "Runs").blocks[0]
    assert isinstance(first, Paragraph) and first.tone == "note"
    assert first.text.startswith("run 1: hostA") and first.text.endswith(str(tmp_path / "gpu"))


def test_an_op_table_keeps_plain_and_prepared_rows_apart_in_series(tmp_path):
    rows = []
    for size in (1 << 10, 1 << 20):
        rows.append(bench("all_reduce", "torch.cuda.comm", size))
        for form, speedup in (("plain", 1.2), ("prepared", 1.5)):
            r = bench("all_reduce", "gpucomm.comm", size, speedup=speedup, baseline="torch.cuda.comm")
            r.form = form
            rows.append(r)
    rows[0].time_us_p99 = rows[0].time_us_median * 5  # the 1 KiB baseline: its pair's ratios are not trusted
    doc = doc_for(tmp_path, ("gpu", env(), rows))
    (table,) = [b for b in section(doc, "all_reduce").blocks if isinstance(b, Table)]
    assert table.headers[:3] == ["backend", "form", "size"]
    series = [(r[0], r[1], r[2]) for r in table.rows]
    assert series == [("torch.cuda.comm", "plain", "1 KiB"), ("torch.cuda.comm", "plain", "1 MiB"),
                      ("gpucomm.comm", "plain", "1 KiB"), ("gpucomm.comm", "plain", "1 MiB"),
                      ("gpucomm.comm", "prepared", "1 KiB"), ("gpucomm.comm", "prepared", "1 MiB")]
    speedups = [r[table.headers.index("speedup")] for r in table.rows]
    assert speedups == ["—", "—", "1.20x (noisy)", "1.20x", "1.50x (noisy)", "1.50x"]
    assert table.flags == ["na", "", "na", "", "na", ""]
