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
