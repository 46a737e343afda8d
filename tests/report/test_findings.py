"""Findings: one sentence per op and backend pair, computed only from rows that can be trusted."""

from __future__ import annotations

from pathlib import Path

from report_records import bench, env

from gpucomm.records import ResultSet
from gpucomm.report import findings, plots
from gpucomm.report.runs import Run


def _run(rows, device_type: str = "cuda") -> Run:
    return Run("label", Path("."), ResultSet(env=[env(device_type=device_type)], bench=rows))


def _pair(op: str, speedups: dict[int, float], **kw) -> list:
    rows = []
    for size, speedup in speedups.items():
        rows.append(bench(op, "torch.cuda.comm", size, time_us=10.0, **kw))
        rows.append(bench(op, "gpucomm.comm", size, time_us=10.0 / speedup, speedup=speedup,
                          baseline="torch.cuda.comm", **kw))
    return rows


def test_faster_from_a_size_up():
    rows = _pair("gather", {1 << 10: 0.8, 1 << 20: 30.0, 1 << 26: 40.0})
    (sentence,) = findings.pair_sentences([_run(rows)])
    assert sentence.startswith("gather: gpucomm.comm vs torch.cuda.comm: 35.00x faster from 1 MiB up, slower below")
    assert "range 30.00–40.00x" in sentence


def test_faster_everywhere_and_slower_everywhere():
    fast = findings.pair_sentences([_run(_pair("broadcast", {8: 1.5, 1 << 20: 2.5}))])[0]
    slow = findings.pair_sentences([_run(_pair("scatter", {8: 0.5, 1 << 20: 0.5}))])[0]
    assert "2.00x faster at every size measured" in fast
    assert "2.00x slower at every size measured" in slow


def test_noisy_and_wrong_rows_are_left_out_and_counted():
    rows = _pair("all_gather", {8: 1.2, 1 << 10: 1.2, 1 << 20: 50.0})
    rows[-1].time_us_p99 = rows[-1].time_us_median * 10  # the 50x row is noisy
    rows[1].wrong = 3  # the 8 B gpucomm row is wrong
    (f,) = findings.pair_findings([_run(rows)])
    assert (f.noisy, f.wrong) == (1, 1)
    assert f.by_size == ((1 << 10, 1.2),)
    sentence = f.sentence()
    assert "50" not in sentence.split("(")[0] and "1 noisy row(s) left out" in sentence
    trust = findings.trust_sentences([_run(rows)])
    assert [tone for tone, _ in trust] == ["warning", "warning"]
    assert "1 of 6 rows returned WRONG" in trust[0][1] and "1 of 6 rows are too noisy" in trust[1][1]


def test_a_noisy_baseline_row_discredits_its_ratio():
    rows = _pair("reduce", {8: 2.0, 1 << 10: 3.0})
    rows[0].time_us_p99 = rows[0].time_us_median * 5  # the baseline at 8 B
    (f,) = findings.pair_findings([_run(rows)])
    assert f.by_size == ((1 << 10, 3.0),) and f.noisy == 1


def test_prepared_rows_are_their_own_pair():
    rows = _pair("broadcast", {8: 1.5})
    prepared = bench("broadcast", "gpucomm.comm", 8, time_us=5.0, speedup=2.0, baseline="torch.cuda.comm")
    prepared.form = "prepared"
    sentences = findings.pair_sentences([_run(rows + [prepared])])
    assert len(sentences) == 2 and "gpucomm.comm (prepared) vs torch.cuda.comm: 2.00x" in sentences[1]


def test_cpu_runs_say_so_in_sentences_trust_signals_and_plots():
    run = _run(_pair("all_reduce", {8: 1.1}, device_type="cpu"), device_type="cpu")
    assert findings.pair_sentences([run])[0].startswith("CPU, all_reduce")
    assert any("CPU numbers" in text for _, text in findings.trust_sentences([run]))
    for fig in (plots.headline_plot([run]), plots.speedup_plot([run], "all_reduce"),
                plots.busbw_plot([run], "all_reduce")):
        assert fig.title.endswith("CPU numbers") and b"CPU numbers" in fig.svg


def test_gpu_plots_do_not_say_cpu():
    run = _run(_pair("all_reduce", {8: 1.1}))
    assert "CPU" not in plots.headline_plot([run]).title


def test_noisy_rows_are_marked_in_the_op_tables(tmp_path):
    from report_records import write

    from gpucomm.report import build

    rows = _pair("all_reduce", {8: 1.5, 1 << 10: 1.5})
    rows[1].time_us_p99 = rows[1].time_us_median * 10
    md = build(write(tmp_path / "run", env(), rows))["markdown"].read_text()
    table = md.split("### all_reduce")[1]
    assert "1.50x (noisy)" in table and "p99 more than 3x the median" in table
    assert table.count("(noisy)") == 2  # the one noisy row and the caption
