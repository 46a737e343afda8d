"""Fitting alpha/beta and compute from records, and saving/loading calibrated profiles."""

from __future__ import annotations

import dataclasses
import math

import pytest

from gpucomm.advisor import calibrate, plan
from gpucomm.advisor.workload import make_workload

from ._synthetic import SIZES, bench, results, train


def test_fit_recovers_alpha_beta_exactly_without_noise():
    sizes = [1e3, 1e5, 1e7]
    a, b = calibrate.fit_alpha_beta(sizes, [20 + 1e-5 * s for s in sizes])
    assert a == pytest.approx(20, rel=1e-9)
    assert b == pytest.approx(1e-5, rel=1e-9)


@pytest.mark.parametrize("alpha_us,gbps", [(20.0, 5.0), (1.0, 365.0), (150.0, 0.8)])
def test_fit_recovers_known_alpha_beta_within_one_percent_from_noisy_records(alpha_us, gbps):
    rows = bench("all_reduce", 4, alpha_us, gbps, SIZES, noise=0.002, seed=7)
    (fit,) = [f for f in calibrate.fit_collectives(rows) if f.band == "all"]
    assert fit.alpha_us == pytest.approx(alpha_us, rel=0.01)
    assert 1 / (fit.beta_us_per_byte * 1e3) == pytest.approx(gbps, rel=0.01)
    assert fit.max_rel_err < 0.01


def test_piecewise_bands_fit_separately():
    # Small messages: 10 us + 1 GB/s; large: 200 us + 10 GB/s (a protocol switch).
    small = bench("all_gather", 2, 10.0, 1.0, [1024, 4096, 16384])
    large = bench("all_gather", 2, 200.0, 10.0, [16 * 2**20, 64 * 2**20, 256 * 2**20])
    fits = {f.band: f for f in calibrate.fit_collectives(small + large)}
    assert fits["small"].alpha_us == pytest.approx(10.0, rel=1e-6)
    assert fits["large"].alpha_us == pytest.approx(200.0, rel=1e-6)
    got = calibrate.collective_fit(list(fits.values()), "all_gather", 2, 32 * 2**20, "process")
    assert got.band == "large"
    assert calibrate.collective_fit(list(fits.values()), "all_gather", 3, 1024, "process") is None


def test_fit_needs_two_sizes_and_positive_times():
    with pytest.raises(calibrate.CalibrationError, match="2 distinct"):
        calibrate.fit_alpha_beta([1.0, 1.0], [1.0, 2.0])
    with pytest.raises(calibrate.CalibrationError, match="> 0"):
        calibrate.fit_alpha_beta([1.0, 2.0], [1.0, 0.0])


def test_wrong_rows_are_not_fitted():
    rows = bench("all_reduce", 2, 5.0, 1.0, SIZES)
    for r in rows:
        r.wrong = 3
    assert calibrate.fit_collectives(rows) == []


def test_derived_link_from_all_reduce():
    rows = bench("all_reduce", 4, 30.0, 6.0, SIZES)
    link = calibrate.derived_link(calibrate.fit_collectives(rows))
    # B = 2(n-1)/n / beta = 1.5 * 6 GB/s; alpha per ring step = 30 us / 6.
    assert link.bandwidth_gbps == pytest.approx(9.0, rel=1e-6)
    assert link.alpha_us == pytest.approx(5.0, rel=1e-6)


def test_compute_fit_line_through_two_batches():
    rows = [train("single", "mlp", 1, 10.0 + 0.5 * b, b, 1000) for b in (16, 64)]
    c = calibrate.fit_compute(rows)["models"]["mlp"]
    assert c["c0_s"] == pytest.approx(0.010, rel=1e-9)
    assert c["c1_s_per_sample"] == pytest.approx(0.0005, rel=1e-9)


def test_compute_fit_one_batch_goes_through_the_origin():
    c = calibrate.fit_compute([train("single", "mlp", 1, 40.0, 32, 1000)])["models"]["mlp"]
    assert (c["c0_s"], c["c1_s_per_sample"]) == (0.0, pytest.approx(0.040 / 32))


def test_calibrated_profile_overrides_datasheet_and_cpu_gloo_exists_only_this_way():
    rs = results(bench("all_reduce", 2, 40.0, 2.0, SIZES), [train("single", "mlp", 1, 30.0, 64, 267280)])
    prof = calibrate.calibrate(rs)
    assert prof.kind == "cpu-gloo" and prof.calibrated
    # The fitted collective, not a formula: 40 us + S / 2 GB/s.
    assert plan.collective_s(prof, "all_reduce", 2**20, 2) == pytest.approx((40 + 2**20 / 2e3) * 1e-6, rel=1e-6)
    wl = make_workload("mlp", dtype="fp32", global_batch=64)
    single = plan.predict("ddp", prof, wl, gpus_per_node=1)
    assert single.compute_s == pytest.approx(0.030)


def test_calibrate_with_nothing_usable_raises():
    with pytest.raises(calibrate.CalibrationError, match="no usable"):
        calibrate.calibrate(results())


def test_per_device_cost_is_fitted_from_residuals():
    wl_params = 267280
    rows = [train("single", "mlp", 1, 20.0, 64, wl_params)]
    rs = results(bench("all_reduce", 2, 40.0, 2.0, SIZES), rows)
    base = calibrate.calibrate(rs)
    wl = make_workload("mlp", dtype="fp32", global_batch=64)
    pred = plan.predict("replicated", base, wl, gpus_per_node=2, per_device_s=0.0).step_time_s
    rs.train.append(train("replicated", "mlp", 2, (pred + 2 * 0.003) * 1e3, 64, wl_params))
    prof = calibrate.calibrate(rs)
    assert prof.calibration["per_device_s"]["replicated"] == pytest.approx(0.003, rel=1e-6)


def test_save_and_load_round_trip(tmp_path):
    rs = results(bench("all_reduce", 2, 40.0, 2.0, SIZES), [train("single", "mlp", 1, 30.0, 64, 267280)])
    prof = calibrate.calibrate(rs)
    path = tmp_path / "p.json"
    calibrate.save_profile(prof, path)
    back = calibrate.load_profile(path)
    assert back.intra == prof.intra
    assert math.isinf(back.calibration["collectives"][-1]["hi"])
    assert plan.collective_s(back, "all_reduce", 12345, 2) == plan.collective_s(prof, "all_reduce", 12345, 2)


def test_load_profile_errors_name_the_flag(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text("{}")
    with pytest.raises(calibrate.CalibrationError, match="--profile"):
        calibrate.load_profile(bad)


def test_fit_overheads_recovers_per_device_cost_and_slowdown():
    # residual = 2 ms per device + 30% of compute, at two device counts and computes.
    rows = [(n, c, 0.002 * n + 0.3 * c) for n, c in ((2, 0.010), (4, 0.050), (2, 0.100))]
    a, s = calibrate.fit_overheads(rows)
    assert (a, s) == (pytest.approx(0.002, rel=1e-6), pytest.approx(0.3, rel=1e-6))
    # Negative residuals never become negative costs.
    assert calibrate.fit_overheads([(2, 0.01, -0.001)]) == (0.0, 0.0)
    # One row: the per-device cost explains it.
    assert calibrate.fit_overheads([(2, 0.01, 0.004)]) == (pytest.approx(0.002), 0.0)


def test_measured_compute_interpolates_between_batches():
    rows = [train("single", "mlp", 1, ms, b, 1000) for b, ms in ((16, 10.0), (64, 70.0))]
    prof = calibrate.calibrate(results(bench("all_reduce", 2, 40.0, 2.0, SIZES), rows))
    wl = make_workload("mlp", dtype="fp32", global_batch=32)
    assert plan.predict("ddp", prof, wl, gpus_per_node=1).compute_s == pytest.approx(0.030)  # between 10 and 70
    wl8 = make_workload("mlp", dtype="fp32", global_batch=8)
    assert plan.predict("ddp", prof, wl8, gpus_per_node=1).compute_s == pytest.approx(0.005)  # proportional below


def test_compute_from_achieved_flops_already_holds_the_optimizer():
    """FLOP/s come from whole measured steps (optimizer included): a model not run gets no optimizer on top."""
    gpu_env = dataclasses.replace(results().env[0], device_type="cuda", devices=[{"name": "NVIDIA H200"}])
    rs = results(train_rows=[dataclasses.replace(train("single", "gpt-124m", 1, 40.0, 16, 124_439_808, 1024),
                                                 device_type="cuda", precision="bf16-autocast")])
    rs.env[0] = gpu_env
    prof = calibrate.calibrate(rs)
    assert prof.memory_bw_gbps  # an H200 profile: the optimizer would otherwise be estimated from HBM bandwidth
    flops = 6 * 124_439_808 * 16 * 1024 / 0.040
    wl = make_workload("gpt-350m", dtype="bf16-autocast", global_batch=8)
    pred = plan.predict("ddp", prof, wl, gpus_per_node=1)
    assert pred.optimizer_s == 0.0
    assert pred.compute_s == pytest.approx(6 * wl.params * 8 * 1024 / flops)
    assert plan.single_step_s(prof, wl) == pytest.approx(pred.compute_s)
