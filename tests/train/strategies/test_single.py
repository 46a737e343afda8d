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


def test_equals_a_hand_written_loop():
    from gpucomm.train.strategies.base import call_model

    for model in ("mlp", "gpt-tiny"):
        cfg = _cfg(model=model, precision="fp32", steps=3, warmup_steps=1)
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
        assert run.losses == losses, model
        assert all(torch.equal(run.state[k], p) for k, p in net.named_parameters())


def test_graphs_notes_and_cpu_refusal():
    cfg = _cfg()
    assert SingleStrategy.notes(cfg) == [] and SingleStrategy.not_applicable(cfg) is None
    cfg.graphs = True  # the config refuses --graphs on CPU; the strategy says why too
    assert "one graph" in SingleStrategy.notes(cfg)[0]
    assert "CUDA graphs need CUDA devices" in SingleStrategy.not_applicable(cfg)
