"""Parameter-count formulas and workload validation."""

from __future__ import annotations

import importlib.util

import pytest

from gpucomm.advisor import workload


def test_gpt2_small_parameter_count_hand_worked():
    # GPT-2 small with its 50257-token vocabulary and tied head: 124,439,808 parameters.
    assert workload.gpt_params(12, 768, 50257, 1024) == 124_439_808


def test_mlp_parameter_count_hand_worked():
    # 256->256 x4 (65,792 each) + 256->16 head (4,112).
    assert workload.mlp_params(256, 256, 4, 16) == 4 * 65_792 + 4_112


@pytest.mark.skipif(importlib.util.find_spec("gpucomm.train.models") is None, reason="gpucomm.train not built")
@pytest.mark.parametrize("name", ["gpt-tiny", "mlp"])
def test_formulas_match_the_training_models(name):
    from gpucomm.train.models import load_workload

    model = load_workload(name).build_model()
    assert workload.make_workload(name).params == sum(p.numel() for p in model.parameters())


def test_units_cover_every_parameter():
    for name in workload.MODEL_SHAPES:
        wl = workload.make_workload(name)
        assert sum(wl.units()) == wl.params


def test_gpt_default_seq_len_and_params_only_workload():
    assert workload.make_workload("gpt-124m").seq_len == 1024
    wl = workload.make_workload(None, params=7_000_000_000)
    assert (wl.params, wl.shape, wl.units(), wl.activation_bytes(8)) == (7_000_000_000, None, [7_000_000_000], 0.0)


@pytest.mark.parametrize("kwargs,match", [
    ({"model": "gpt-9b"}, "not a built-in model"),
    ({"model": None}, "--model NAME or --params"),
    ({"model": "mlp", "dtype": "int8"}, "--dtype"),
    ({"model": "mlp", "optimizer": "lamb"}, "--optimizer"),
    ({"model": "mlp", "global_batch": 0}, "--global-batch"),
])
def test_bad_workloads(kwargs, match):
    model = kwargs.pop("model")
    with pytest.raises(workload.WorkloadError, match=match):
        workload.make_workload(model, **kwargs)


def test_gpt_activations_hand_worked():
    # 34 s b h L + 8 s b V: s=2, b=3, h=4, L=5, V=7 -> 34*120 + 8*42.
    shape = workload.ModelShape(family="gpt", layers=5, d_model=4, vocab=7, seq_len=2)
    wl = workload.make_workload("tiny", shape=shape, dtype="fp32")
    assert wl.activation_bytes(3) == pytest.approx(34 * 120 + 336, rel=1e-12)


def test_gpt124m_memory_estimate_is_near_the_measured_peak():
    # measured-h200.md: 15.0 GiB peak for batch 16x1024 with fp32 params and AdamW (16 Psi).
    wl = workload.make_workload("gpt-124m", dtype="fp32")
    est = wl.activation_bytes(16) + 16 * wl.params
    assert 0.8 < est / (15.0 * 2**30) < 1.0
