"""Launching is strategy-agnostic: each rank gets its slice of the strategy's devices; results come back."""

import torch

from gpucomm.train.config import TrainConfig
from gpucomm.train.launching import _build, state_from_bytes
from gpucomm.train.strategies.ddp import DDPStrategy


class _TwoPerRank(DDPStrategy):
    """A multi-device-per-process strategy's shape (replicated with --nproc): 4 devices over 2 ranks."""

    name = "two-per-rank"

    @classmethod
    def devices_needed(cls, config):
        return list(config.devices)

    @classmethod
    def world_size(cls, config):
        return 2


def _cfg(**kw):
    base = dict(model="mlp", steps=2, warmup_steps=1, global_batch=8, devices=["cpu"] * 4)
    return TrainConfig(**{**base, **kw})


def test_each_rank_is_built_on_its_slice(monkeypatch):
    for var in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"):
        monkeypatch.delenv(var, raising=False)
    cfg = _cfg()
    s = _build(_TwoPerRank, cfg, 1, 2)
    assert (s.rank, s.world, s.devices) == (1, 2, [torch.device("cpu")] * 2)
    d = _build(DDPStrategy, _cfg(nproc=4), 3, 4)
    assert (d.rank, d.world, d.devices) == (3, 4, [torch.device("cpu")])


def test_under_torchrun_the_local_rank_picks_the_slice(monkeypatch):
    monkeypatch.setenv("RANK", "5")
    monkeypatch.setenv("WORLD_SIZE", "8")
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    s = _build(_TwoPerRank, _cfg(), 5, 8)
    assert s.rank == 5 and s.world == 8 and len(s.devices) == 2


def test_state_round_trips_as_bytes():
    import io

    state = {"w": torch.arange(3.0)}
    buffer = io.BytesIO()
    torch.save(state, buffer)
    assert torch.equal(state_from_bytes(buffer.getvalue())["w"], state["w"])
