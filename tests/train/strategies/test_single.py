"""``single``: the plain loop a user writes, eager or replayed from one CUDA graph."""

import pytest
import torch

from gpucomm.train.config import TrainConfig
from gpucomm.train.loop import run_strategy
from gpucomm.train.models import load_workload
from gpucomm.train.strategies import SingleStrategy
from gpucomm.train.strategies.base import call_model


def _cfg(**kw) -> TrainConfig:
    base = dict(strategies=("single",), model="mlp", steps=3, warmup_steps=1, global_batch=8,
                devices=["cpu", "cpu"], precision="fp32")
    return TrainConfig(**{**base, **kw})


@pytest.mark.parametrize("model", ["mlp", "gpt-tiny"])
def test_equals_a_hand_written_loop(model):
    cfg = _cfg(model=model)
    workload = load_workload(model)
    run = run_strategy(SingleStrategy(cfg, SingleStrategy.devices_needed(cfg)), workload, cfg)

    net = workload.build_model()
    opt = torch.optim.AdamW(net.parameters(), lr=cfg.lr)
    losses = []
    for s in range(cfg.steps):
        x, y = workload.batch_fn(cfg.seed, s, cfg.global_batch)
        loss = workload.loss_fn(call_model(net, x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.item())
    assert run.losses == losses
    assert all(torch.equal(run.state[k], p) for k, p in net.named_parameters())


def test_one_device_and_what_it_says():
    cfg = _cfg()
    assert SingleStrategy.devices_needed(cfg) == [torch.device("cpu")]
    assert SingleStrategy(cfg, cfg.devices).devices == [torch.device("cpu")]
    assert SingleStrategy.world_size(cfg) == 1 and SingleStrategy.notes(cfg) == []
    cfg.graphs = True
    assert "one graph" in SingleStrategy.notes(cfg)[0]


def test_step_returns_the_loss_on_the_device_without_reading_it():
    cfg = _cfg()
    strategy = SingleStrategy(cfg, cfg.devices)
    strategy.prepare(load_workload("mlp"))
    result = strategy.step(0, load_workload("mlp").batch_fn(0, 0, 8))
    assert isinstance(result.loss, torch.Tensor) and result.loss.dim() == 0 and not result.loss.requires_grad
    strategy.teardown()
