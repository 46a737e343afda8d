"""``ddp``: one process per device, a process group even at world size 1; devices per rank."""

import pytest
import torch

from gpucomm.train.config import ConfigError, TrainConfig
from gpucomm.train.strategies.ddp import DDPStrategy


def _cfg(**kw):
    base = dict(model="mlp", steps=2, warmup_steps=1, global_batch=12, devices=["cpu", "cpu"])
    return TrainConfig(**{**base, **kw})


def test_one_device_per_rank_on_cpu_follows_the_list_or_nproc():
    assert DDPStrategy.devices_needed(_cfg()) == [torch.device("cpu")] * 2
    assert DDPStrategy.world_size(_cfg(nproc=3)) == 3
    assert DDPStrategy.world_size(_cfg(nproc=1)) == 1
    assert DDPStrategy.rank_devices(_cfg(nproc=3), 2, 3) == [torch.device("cpu")]


def test_needs_its_process_group_even_at_world_size_one():
    assert DDPStrategy.needs_process_group(_cfg(nproc=1)) is True


def test_nccl_needs_a_distinct_gpu_per_rank(monkeypatch):
    cfg = _cfg()
    monkeypatch.setattr(type(cfg), "device_type", property(lambda self: "cuda"))
    cfg.devices = [torch.device("cuda", 0), torch.device("cuda", 0), torch.device("cuda", 1)]
    assert DDPStrategy.devices_needed(cfg) == [torch.device("cuda", 0), torch.device("cuda", 1)]
    cfg.nproc = 3
    with pytest.raises(ConfigError, match="--nproc 3: DDP needs one distinct GPU per process"):
        DDPStrategy.devices_needed(cfg)
