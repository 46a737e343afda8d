from __future__ import annotations

import pytest
from report_records import env, write

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
    a = write(tmp_path / "a", env(), [])
    b = write(tmp_path / "b", env(), [])
    runs = load_runs([a, b])
    assert [r.label for r in runs] == [f"{run_label(env())} (a)", f"{run_label(env())} (b)"]
    assert [r.tag for r in runs] == ["run 1", "run 2"]


def test_load_runs_rejects_empty_and_missing(tmp_path):
    with pytest.raises(ValueError, match="at least one"):
        load_runs([])
    (tmp_path / "empty").mkdir()
    with pytest.raises(RecordError, match="no \\*.jsonl"):
        load_runs([tmp_path / "empty"])
