"""Fitting alpha/beta and compute from records, and saving/loading calibrated profiles."""

from __future__ import annotations

import dataclasses
import math

import pytest

from gpucomm import models
from gpucomm.advisor import calibrate, hardware, measured, search, timing
from gpucomm.advisor.fits import collective_time_s
from gpucomm.advisor.job import Job
from gpucomm.advisor.layout import Layout, preset
from gpucomm.advisor.precision import Precision

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
    rows = [train("single", "gpt-tiny", 1, 10.0 + 0.5 * b, b, 1000, 32) for b in (16, 64)]
    c = calibrate.fit_compute(rows)["models"]["gpt-tiny"]
    assert c["c0_s"] == pytest.approx(0.010, rel=1e-9)
    assert c["c1_s_per_sample"] == pytest.approx(0.0005, rel=1e-9)
    assert c["points"] == [[16, pytest.approx(0.018)], [64, pytest.approx(0.042)]]


def test_compute_fit_one_batch_goes_through_the_origin_and_repeats_take_the_median():
    c = calibrate.fit_compute([train("single", "gpt-tiny", 1, 40.0, 32, 1000, 32)])["models"]["gpt-tiny"]
    assert (c["c0_s"], c["c1_s_per_sample"]) == (0.0, pytest.approx(0.040 / 32))
    rows = [train("single", "gpt-tiny", 1, ms, 32, 1000, 32) for ms in (40.0, 44.0, 90.0)]
    assert calibrate.fit_compute(rows)["models"]["gpt-tiny"]["points"] == [[32, pytest.approx(0.044)]]


def _cpu(rows, sizes=SIZES):
    return calibrate.calibrate(results(bench("all_reduce", 2, 40.0, 2.0, sizes), rows))


def test_calibrated_profile_reproduces_its_collectives_and_cpu_gloo_exists_only_this_way():
    prof = _cpu([train("single", "gpt-tiny", 1, 30.0, 64, 0, 32)])
    assert prof.kind == "cpu-gloo" and prof.calibrated and prof.name == "cpu-gloo (calibrated)"
    # measured points are reproduced exactly; between them interpolated: 40 us + S / 2 GB/s is linear
    assert timing._group_s(prof, "all_reduce", 2**20, 2, 2, 2) == pytest.approx((40 + 2**20 / 2e3) * 1e-6)
    assert timing._group_s(prof, "all_reduce", 3 * 2**20, 2, 2, 2) == pytest.approx((40 + 3 * 2**20 / 2e3) * 1e-6)
    # 4 participants were not measured: the link derived from the n=2 fit prices them
    assert timing._group_s(prof, "all_reduce", 2**20, 4, 4, 4) > timing._group_s(prof, "all_reduce", 2**20, 2, 2, 2)
    # train records alone: no link at all, and communication is left inside the wrappers' fitted cost
    alone = calibrate.calibrate(results(train_rows=[train("single", "gpt-tiny", 1, 30.0, 64, 0, 32)]))
    assert alone.calibration["comm_in_wrapper"] and timing._group_s(alone, "all_reduce", 2**20, 2, 2, 2) == 0.0


def test_calibrate_with_nothing_usable_raises():
    with pytest.raises(calibrate.CalibrationError, match="no usable"):
        calibrate.calibrate(results())


def test_per_device_cost_is_fitted_from_what_the_model_leaves_over():
    rows = [train("single", "gpt-tiny", 1, 20.0, 64, 0, 32)]
    base = dataclasses_replace_calibration(_cpu(rows), per_device_s={"replicated": 0.0})
    job = Job(arch=models.get("gpt-tiny"), profile=base, nodes=1, gpus_per_node=2, global_batch=64, seq=32,
              precision=Precision(compute="fp32"))
    pred = search.evaluate(job, preset("replicated", 2, 64)).time.step_s
    prof = _cpu([*rows, train("replicated", "gpt-tiny", 2, (pred + 2 * 0.003) * 1e3, 64, 0, 32)])
    assert prof.calibration["per_device_s"]["replicated"] == pytest.approx(0.003, rel=1e-6)
    assert all(r["predicted_s"] == pytest.approx(r["measured_s"]) for r in calibrate.reproduce(prof, results(
        bench("all_reduce", 2, 40.0, 2.0, SIZES), [*rows, train("replicated", "gpt-tiny", 2, (pred + 0.006) * 1e3,
                                                                    64, 0, 32)])))


def test_save_and_load_round_trip(tmp_path):
    prof = _cpu([train("single", "gpt-tiny", 1, 30.0, 64, 0, 32)])
    path = tmp_path / "p.json"
    calibrate.save_profile(prof, path)
    back = calibrate.load_profile(path)
    assert back.intra == prof.intra and back.name == prof.name
    assert math.isinf(back.calibration["collectives"][-1]["hi"])
    for size in (1000, 12345, 2**30):
        assert collective_time_s(back.calibration, "all_reduce", 2, size, "process") == \
            collective_time_s(prof.calibration, "all_reduce", 2, size, "process")


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
    prof = _cpu([train("single", "gpt-tiny", 1, ms, b, 0, 32) for b, ms in ((16, 10.0), (64, 70.0))])
    job = Job(arch=models.get("gpt-tiny"), profile=prof, nodes=1, gpus_per_node=1, global_batch=32, seq=32,
              precision=Precision(compute="fp32"))
    fit = measured.model_fit(job)
    assert measured.step_at(fit, 32) == pytest.approx(0.030)  # between 10 and 70 ms
    assert measured.step_at(fit, 8) == pytest.approx(0.005)  # proportional below the smallest
    assert measured.step_at(fit, 128) == pytest.approx(0.150)  # along the last segment above
    # the per-step fixed part (the intercept, -10 ms here, clamped at 0) and the rest per micro-batch
    one = search.evaluate(job, Layout(mb=32)).time
    acc = search.evaluate(job, Layout(mb=16)).time  # two micro-batches of 16
    assert one.step_s == pytest.approx(0.030) and acc.step_s == pytest.approx(2 * 0.010)
    assert measured.parts(job, Layout(tp=2, mb=32)) is None  # measured on one device: no tensor parallel


def test_gpu_efficiency_is_calibrated_from_single_steps():

    arch, prof = models.get("gpt-124m"), hardware.get("h200-nvswitch")
    job = Job(arch=arch, profile=prof, nodes=1, gpus_per_node=1, global_batch=16, seq=1024)
    pred = timing.step_time(job, Layout(mb=16)).step_s
    row = dataclasses.replace(train("single", "gpt-124m", 1, 2e3 * pred, 16, arch.params(), 1024),
                              device_type="cuda", precision="bf16-autocast")
    cal = calibrate.calibrate(results(train_rows=[row]), "h200-nvswitch")
    assert cal.gemm_efficiency == pytest.approx(prof.gemm_efficiency / 2, rel=0.03)
    assert "calibrated" in cal.sources["gemm_efficiency"]
    assert calibrate.calibrated_efficiency(prof) == (None, "")


def test_colocated_devices_share_a_gpu_or_the_cores():
    gpu = hardware.get("h200-nvswitch")
    assert calibrate.colocated(gpu, 2, ["cuda:0", "cuda:0"]) == 2 and calibrate.colocated(gpu, 2, ["cuda:0", "cuda:1"]) == 1
    cpu = dataclasses_replace_host(_cpu([train("single", "gpt-tiny", 1, 30.0, 64, 0, 32)]), cores=2, threads=2)
    assert calibrate.colocated(cpu, 2) == 2 and calibrate.colocated(cpu, 1) == 1


def dataclasses_replace_host(prof, **host):
    return dataclasses_replace_calibration(prof, host=host)


def dataclasses_replace_calibration(prof, **keys):
    return dataclasses.replace(prof, calibration={**prof.calibration, **keys})
