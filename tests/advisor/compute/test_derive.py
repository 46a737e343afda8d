"""The H100 SXM derived from a measured H200, against the datasheet figures it cites."""

import pytest

from gpucomm.advisor.compute.derive import TARGETS, derive
from gpucomm.advisor.compute.profile import ProfileSource

from ._profiles import synthetic


def test_memory_bound_time_scales_by_the_hbm_ratio_and_compute_bound_by_the_clock_ratio():
    h200 = synthetic()
    src = derive(h200, "h100-nvswitch")
    assert src is not None
    assert src.scale.memory == pytest.approx(4.8 / 3.35)  # 1.4328: H200 HBM3e / H100 SXM HBM3, datasheets
    # same die, same 700 W limit; the H200 sustains 0.966 of the H100's clock under the same layer loads (measured)
    assert src.scale.compute == TARGETS["h100-nvswitch"].clock_ratio == 0.966
    assert src.scale(2.0, 3.0) == pytest.approx(2.0 * 0.966 + 3.0 * 4.8 / 3.35)


def test_every_derived_figure_is_an_assumption_line_with_its_source():
    src = derive(synthetic(), "h100-nvswitch")
    lines = src.assumptions(type("J", (), {"software": "eager", "loss": "upcast"})())
    text = "\n".join(lines)
    assert "x 1.4328 = 4.8 / 3.35 TB/s" in text and "NVIDIA H100 Tensor Core GPU datasheet" in text
    assert "NVIDIA H200 Tensor Core GPU datasheet" in text and "700 W" in text
    assert "compute-bound time x 0.966" in text and "sustained_clock.py" in text and "clock_ratio.py" in text


def test_the_optimizer_and_embedding_are_memory_bound():
    h200, h100 = ProfileSource(synthetic()), derive(synthetic(), "h100-nvswitch")
    job = type("J", (), {})()
    assert h100.optimizer_s(job, 1e8).value == pytest.approx(h200.optimizer_s(job, 1e8).value * 4.8 / 3.35)


def test_a_profile_at_another_power_limit_says_the_clock_ratio_is_weaker():
    src = derive(synthetic(power_limit_w=500.0), "h100-nvswitch")
    text = "\n".join(src.assumptions(type("J", (), {"software": "eager", "loss": "upcast"})()))
    assert "ran at 500 W, not 700 W" in text


def test_only_same_die_targets_are_derived():
    assert derive(synthetic(), "a100-nvlink3") is None
    assert derive(synthetic(), "h100-96gb-nvswitch") is None  # 500 W: no public sustained clock
    assert derive(synthetic(gpu="NVIDIA A100-SXM4-80GB"), "h100-nvswitch") is None
    assert set(TARGETS) == {"h100-nvswitch"}
