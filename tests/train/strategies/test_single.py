"""``single``: the baseline on the first device; its step leaves the loss on the device and reports phases."""

import torch

from gpucomm.train.config import TrainConfig
from gpucomm.train.loop import run_strategy
from gpucomm.train.models import load_workload
from gpucomm.train.strategies.single import SingleStrategy


def _cfg(**kw):
    base = dict(model="mlp", steps=4, warmup_steps=2, global_batch=8, devices=["cpu", "cpu"])
    return TrainConfig(**{**base, **kw})


def test_trains_on_the_first_device_only():
    cfg = _cfg()
    s = SingleStrategy(cfg, cfg.devices)
    assert s.devices == cfg.devices[:1]
    assert SingleStrategy.devices_needed(cfg) == cfg.devices[:1]
    assert SingleStrategy.world_size(cfg) == 1 and not SingleStrategy.needs_process_group(cfg)


def test_step_returns_a_detached_device_loss_and_phases():
    cfg = _cfg()
    s = SingleStrategy(cfg, cfg.devices)
    workload = load_workload("mlp")
    s.prepare(workload)
    try:
        result = s.step(0, workload.batch_fn(0, 0, 8))
        assert isinstance(result.loss, torch.Tensor) and result.loss.dim() == 0 and not result.loss.requires_grad
        assert {"forward", "backward", "optimizer"} <= set(s.take_host_phases())
        assert all(p.grad is None for p in s.model.parameters())  # zero_grad(set_to_none=True): no kept grads
    finally:
        s.teardown()


def test_a_run_records_host_time_per_device():
    cfg = _cfg()
    run = run_strategy(SingleStrategy(cfg, cfg.devices), load_workload("mlp"), cfg)
    assert run.devices_driven == 1 and len(run.host_ms) == 2 and all(t > 0 for t in run.host_ms)
    assert run.host_source == "timed steps"  # CPU: no events, the host clock is the step time
    assert run.gpu_ms is None and len(run.losses) == 4 and run.window_ms > 0
