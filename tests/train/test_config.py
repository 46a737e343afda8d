import pytest
import torch

from gpucomm.train.config import TOLERANCES, ConfigError, TrainConfig


def _cfg(**kw):
    base = dict(model="gpt-tiny", steps=3, warmup_steps=1, global_batch=4, devices=["cpu", "cpu"])
    return TrainConfig(**{**base, **kw})


def test_single_first_and_deduplicated():
    cfg = _cfg(strategies=("replicated", "ddp", "replicated"))
    assert cfg.strategies == ("single", "replicated", "ddp")
    assert _cfg(strategies="ddp,single").strategies == ("single", "ddp")


def test_unknown_strategy_lists_valid_names():
    with pytest.raises(ConfigError) as info:
        _cfg(strategies=("single", "fsdp2"))
    assert "'fsdp2'" in str(info.value)
    for name in ("single", "dp", "replicated", "ddp"):
        assert name in str(info.value)


def test_batch_must_divide_by_devices():
    with pytest.raises(ConfigError, match="--global-batch 5 does not divide by the 2 devices"):
        _cfg(global_batch=5)
    _cfg(global_batch=6)


@pytest.mark.parametrize("kw, match", [
    ({"steps": 0}, "--steps"),
    ({"warmup_steps": 3}, "leaves no timed step"),
    ({"global_batch": 0}, "--global-batch"),
    ({"lr": 0.0}, "--lr"),
    ({"nproc": 0}, "--nproc"),
    ({"precision": "fp8"}, "--precision"),
    ({"precision": "bf16"}, "only on CUDA"),
    ({"tolerance": -1.0}, "--tolerance"),
    ({"bucket_cap_mb": 0}, "bucket sizes"),
])
def test_bad_values(kw, match):
    with pytest.raises(ConfigError, match=match):
        _cfg(**kw)


def test_devices_parsed_and_of_one_type():
    cfg = _cfg()
    assert cfg.devices == [torch.device("cpu")] * 2 and cfg.device_type == "cpu"
    with pytest.raises(ValueError, match="--devices"):
        _cfg(devices=["cpu", "cuda:0"])


def test_precision_and_tolerance_on_cpu():
    cfg = _cfg()
    assert cfg.resolved_precision() == "fp32"
    assert TOLERANCES["fp32"] == 1e-5 and TOLERANCES["bf16-autocast"] > TOLERANCES["fp32"]


def test_ddp_devices_on_cpu_follow_the_list_or_nproc():
    assert len(_cfg().ddp_devices()) == 2
    assert len(_cfg(nproc=3, global_batch=6).ddp_devices()) == 3
