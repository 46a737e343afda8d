"""Strategies resolved once: names checked, devices, processes, notes and applicability asked up front."""

import pytest
import torch

from gpucomm.train.config import ConfigError, TrainConfig
from gpucomm.train.requirements import resolve


def _cfg(**kw):
    base = dict(model="mlp", steps=2, warmup_steps=1, global_batch=8, devices=["cpu", "cpu"])
    return TrainConfig(**{**base, **kw})


def test_every_strategy_is_described_before_anything_is_built():
    plans = {p.name: p for p in resolve(_cfg(strategies=("dp", "ddp")))}
    assert list(plans) == ["single", "dp", "ddp"]
    assert plans["single"].devices == [torch.device("cpu")] and not plans["single"].process_group
    assert plans["dp"].not_applicable and "CUDA" in plans["dp"].not_applicable
    assert plans["ddp"].process_group and plans["ddp"].world_size == 2 and len(plans["ddp"].devices) == 2


def test_unknown_names_list_the_valid_ones():
    with pytest.raises(ConfigError) as info:
        resolve(_cfg(strategies=("single", "fsdp2")))
    assert "'fsdp2'" in str(info.value)
    for name in ("single", "dp", "replicated", "ddp"):
        assert name in str(info.value)


def test_a_batch_that_does_not_divide_names_the_strategy():
    with pytest.raises(ConfigError, match="--global-batch 8 does not divide by the 3 devices of strategy 'ddp'"):
        resolve(_cfg(strategies=("ddp",), nproc=3))


def test_a_not_applicable_strategy_is_not_checked_for_divisibility():
    (single, dp) = resolve(_cfg(strategies=("dp",), devices=["cpu"] * 4, global_batch=4))
    assert dp.not_applicable and len(dp.devices) == 4
