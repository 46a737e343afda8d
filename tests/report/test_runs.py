from __future__ import annotations

import pytest
from report_records import bench, env, write

from gpucomm.records import RecordError
from gpucomm.report.runs import device_name, load_runs, run_label


def test_label_names_host_device_torch_and_date():
    assert run_label(env()) == "hostA · 2x NVIDIA H200 · torch 2.11.0+cu130 · 2026-12-02"
    assert device_name(env(device=None, device_type="cpu")) == "CPU"
    assert device_name(env(device=None, advise={"hardware": "h200-nvswitch"})) == "prediction for h200-nvswitch"
    assert device_name(env(device=None)) == "no devices recorded"


def test_only_measured_cpu_rows_make_cpu_numbers(tmp_path):
    from report_records import advice_rows, bench

    predicted = write(tmp_path / "advise", env(device=None, device_type="cpu"), advice_rows())
    measured = write(tmp_path / "bench", env(), [bench(device_type="cpu")])
    assert [r.is_cpu for r in load_runs([predicted, measured])] == [False, True]


def test_identical_env_labels_are_told_apart(tmp_path):
    a = write(tmp_path / "a", env(), [bench()])
    b = write(tmp_path / "b", env(), [bench()])
    runs = load_runs([a, b])
    assert [r.label for r in runs] == [f"{run_label(env())} (a)", f"{run_label(env())} (b)"]
    assert [r.tag for r in runs] == ["run 1", "run 2"]


def test_load_runs_rejects_empty_and_missing(tmp_path):
    with pytest.raises(ValueError, match="at least one"):
        load_runs([])
    (tmp_path / "empty").mkdir()
    with pytest.raises(RecordError, match="no \\*.jsonl"):
        load_runs([tmp_path / "empty"])


def test_a_directory_of_runs_is_each_run_in_name_order_and_row_less_runs_are_skipped(tmp_path):
    from report_records import train_rows

    root = tmp_path / "gpucomm-results"
    write(root / "train-20261203-100000-2", env(), train_rows())
    write(root / "bench-20261203-090000-1", env(), [bench()])
    write(root / "nested" / "bench-20261203-110000-3", env(), [bench()])
    write(root / "bench-20261203-120000-4", env(), [])  # stopped before its first row
    (root / "report-20261203-130000-5").mkdir()  # a report directory: no records, not a run
    (root / "report-20261203-130000-5" / "report.md").write_text("# old report\n")
    skipped: list = []
    runs = load_runs([root], skipped)
    assert [r.directory.name for r in runs] == ["bench-20261203-090000-1", "bench-20261203-110000-3",
                                                "train-20261203-100000-2"]
    assert [len(r.results.bench) + len(r.results.train) for r in runs] == [1, 1, 5]  # never merged
    assert [p.name for p in skipped] == ["bench-20261203-120000-4"]
    assert [r.tag for r in runs] == ["run 1", "run 2", "run 3"]


def test_a_run_directory_with_records_is_one_run_whatever_lies_below(tmp_path):
    run = write(tmp_path / "run", env(), [bench()])
    write(run / "sub", env(), [bench(), bench()])
    (only,) = load_runs([run])
    assert only.directory == run and len(only.results.bench) == 3  # records.load reads the tree, as before


def test_a_named_directory_without_result_rows_is_refused(tmp_path):
    with pytest.raises(RecordError, match="only an env block .the run stopped before its first row."):
        load_runs([write(tmp_path / "stopped", env(), [])])
    root = tmp_path / "all-stopped"
    write(root / "a", env(), [])
    with pytest.raises(RecordError, match="hold no result rows"):
        load_runs([root])
