"""gpucomm.advisor.fits: picking the fitted cost for (op, n, size) and evaluating it."""

import math

import pytest

from gpucomm.advisor.fits import CollectiveFit, collective_fit


def fit(op="all_reduce", n=8, scope="process", band="all", lo=0.0, hi=math.inf, alpha=10.0, beta=0.001):
    return CollectiveFit(op=op, n=n, scope=scope, band=band, lo=lo, hi=hi, alpha_us=alpha,
                         beta_us_per_byte=beta, points=5, max_rel_err=0.01)


def test_time_s_is_alpha_plus_beta_times_size_in_seconds():
    assert fit(alpha=10.0, beta=0.001).time_s(1_000_000) == pytest.approx((10.0 + 1000.0) * 1e-6)
    assert fit(alpha=3.0, beta=0.5).time_s(0) == pytest.approx(3e-6)


def test_the_band_covering_the_size_wins_over_the_all_band():
    small = fit(band="small", lo=0, hi=1024, alpha=1.0)
    large = fit(band="large", lo=1024, hi=math.inf, alpha=2.0)
    whole = fit(band="all", alpha=3.0)
    fits = [whole, small, large]
    assert collective_fit(fits, "all_reduce", 8, 1023, "process") is small
    assert collective_fit(fits, "all_reduce", 8, 1024, "process") is large  # lo inclusive, hi exclusive


def test_the_all_band_covers_sizes_no_band_holds():
    small = fit(band="small", lo=0, hi=1024)
    whole = fit(band="all", alpha=3.0)
    assert collective_fit([small, whole], "all_reduce", 8, 4096, "process") is whole
    assert collective_fit([small], "all_reduce", 8, 4096, "process") is None


def test_op_and_n_must_match_exactly():
    fits = [fit(op="all_reduce", n=8)]
    assert collective_fit(fits, "all_reduce", 4, 100, "process") is None
    assert collective_fit(fits, "broadcast", 8, 100, "process") is None


def test_the_asked_scope_is_preferred_and_the_other_is_the_fallback():
    local = fit(scope="local", alpha=1.0)
    process = fit(scope="process", alpha=2.0)
    assert collective_fit([process, local], "all_reduce", 8, 100, "local") is local
    assert collective_fit([local, process], "all_reduce", 8, 100, "process") is process
    assert collective_fit([process], "all_reduce", 8, 100, "local") is process
    assert collective_fit([local], "all_reduce", 8, 100, "process") is local


def test_fits_are_frozen_keyword_only_records():
    f = fit()
    with pytest.raises(AttributeError):
        f.alpha_us = 1.0
    with pytest.raises(TypeError):
        CollectiveFit("all_reduce", 8, "process", "all", 0, 1, 1.0, 1.0, 1, 0.0)


def test_measured_points_are_interpolated_and_band_fits_extrapolate():
    from gpucomm.advisor.fits import collective_time_s, interpolate

    assert interpolate([[0, 0.0], [10, 10.0]], 5) == 5.0 and interpolate([[0, 0.0], [10, 10.0]], 11) is None
    cal = {"collective_points": [{"op": "all_reduce", "n": 2, "scope": "process", "points": [[1000, 10.0],
                                                                                           [3000, 30.0]]}],
           "collectives": [{"op": "all_reduce", "n": 2, "scope": "process", "band": "all", "lo": 0,
                            "hi": float("inf"), "alpha_us": 1.0, "beta_us_per_byte": 0.01, "points": 2,
                            "max_rel_err": 0.0}]}
    approx = pytest.approx
    assert collective_time_s(cal, "all_reduce", 2, 2000, "process") == approx(20e-6)  # between measured points
    assert collective_time_s(cal, "all_reduce", 2, 2000, "local") == approx(20e-6)  # the other scope when alone
    assert collective_time_s(cal, "all_reduce", 2, 10_000, "process") == approx((1 + 100) * 1e-6)  # fit beyond
    assert collective_time_s(cal, "all_gather", 2, 2000, "process") is None
    assert collective_time_s(None, "all_reduce", 2, 2000, "process") is None
