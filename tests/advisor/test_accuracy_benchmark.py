"""benchmarks/advisor_accuracy.py: repeats merged, A/A noise, the held-out split, one-GPU form."""

from __future__ import annotations

import dataclasses
import importlib.util
from pathlib import Path

import pytest

from gpucomm.advisor import calibrate, search
from gpucomm.advisor.layout import preset

from ._synthetic import results, train

_PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "advisor_accuracy.py"
_spec = importlib.util.spec_from_file_location("advisor_accuracy", _PATH)
acc = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(acc)

GPT = 124_439_808  # gpt-124m parameters


def _row(strategy, model, n, ms, batch, params=GPT, seq=1024):
    return train(strategy, model, n, ms, batch, params, seq)


def test_repeats_merge_to_their_median_and_aa_noise_is_the_first_two():
    rs = results(train_rows=[_row("single", "gpt-124m", 1, 10.0, 8), _row("single", "gpt-124m", 1, 14.0, 8),
                             _row("single", "gpt-124m", 1, 11.0, 8), _row("single", "gpt-124m", 1, 30.0, 16)])
    merged, values = acc.merge_repeats(rs)
    by_batch = {r.global_batch: r.step_ms_median for r in merged.train}
    assert by_batch == {8: 11.0, 16: 30.0}
    assert values[("single", "gpt-124m", 1, 8)] == [10.0, 14.0, 11.0]
    assert acc.aa_noise(values[("single", "gpt-124m", 1, 8)]) == pytest.approx(4 / 12)
    assert acc.aa_noise([30.0]) is None
    assert "median 33.3%" in acc.noise_summary(values)


def test_failed_rows_are_not_merged():
    bad = dataclasses.replace(_row("ddp", "gpt-124m", 1, 99.0, 8), status="failed")
    merged, _ = acc.merge_repeats(results(train_rows=[_row("ddp", "gpt-124m", 1, 10.0, 8), bad]))
    assert [r.step_ms_median for r in merged.train] == [10.0]


def test_calibrate_on_holds_out_everything_else_single_rows_included():
    rows = [_row("single", "gpt-124m", 1, 10.0, 8), _row("single", "gpt-124m", 1, 18.0, 16),
            _row("single", "gpt-124m", 1, 34.0, 32), _row("ddp", "gpt-124m", 1, 19.0, 16),
            _row("single", "gpt-350m", 1, 50.0, 8, params=354_823_168)]
    cal, held = acc.split(results(train_rows=rows), calibrate_on=["single:gpt-124m:8", "single:gpt-124m:16"])
    assert sorted(r.global_batch for r in cal.train) == [8, 16]
    assert {(r.strategy, r.model, r.global_batch) for r in held} == {
        ("single", "gpt-124m", 32), ("ddp", "gpt-124m", 16), ("single", "gpt-350m", 8)}
    with pytest.raises(SystemExit, match="matches no train row"):
        acc.split(results(train_rows=rows), calibrate_on=["ddp:mlp"])
    with pytest.raises(SystemExit, match="expected strategy:model"):
        acc.split(results(train_rows=rows), calibrate_on=["single"])


def test_one_gpu_form_predicts_extrapolated_compute_and_ddp_as_a_preset():
    rows = [_row("single", "gpt-124m", 1, 10.0, 8), _row("single", "gpt-124m", 1, 18.0, 16),
            _row("single", "gpt-124m", 1, 40.0, 32), _row("ddp", "gpt-124m", 1, 20.0, 16)]
    out, _ = acc.evaluate(results(train_rows=rows), calibrate_on=["single:gpt-124m:8", "single:gpt-124m:16"])
    pred = {(r["strategy"], r["model"], r["batch"]): r["predicted_ms"] for r in out}
    assert pred[("single", "gpt-124m", 32)] == pytest.approx(34.0)  # 18 + 16 x (18 - 10) / 8, the last segment
    assert pred[("ddp", "gpt-124m", 16)] == pytest.approx(18.0)  # no ddp record calibrated its hooks


def test_single_step_has_no_wrapper_overhead_and_ddp_carries_its_calibrated_one():
    rs = results(train_rows=[_row("single", "gpt-124m", 1, 20.0, 16), _row("ddp", "gpt-124m", 1, 21.0, 16)])
    prof = calibrate.calibrate(rs)
    single = calibrate.job_for_record(prof, rs.train[0])
    assert search.evaluate(*single).time.step_s == pytest.approx(0.020)
    assert search.evaluate(single[0], preset("ddp", 1, 16)).time.step_s == pytest.approx(0.021)
