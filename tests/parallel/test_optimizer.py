"""gpucomm.parallel.optimizer: one Optimizer to the user (groups, schedulers, GradScaler, checkpoints), one per replica."""

import copy

import pytest
import torch
from torch import nn

from gpucomm.parallel.optimizer import ReplicatedOptimizer


def _facade(n=2, **kw):
    torch.manual_seed(0)
    models = [nn.Linear(3, 2)]
    models += [copy.deepcopy(models[0]) for _ in range(n - 1)]
    opts = [torch.optim.AdamW(m.parameters(), lr=0.1, **kw) for m in models]
    stepped = []
    facade = ReplicatedOptimizer(opts, step_fn=lambda: [o.step() for o in opts] and stepped.append(1),
                                 zero_grad_fn=lambda none: [o.zero_grad(none) for o in opts])
    return facade, models, opts, stepped


def test_groups_hold_every_replica_and_hyperparameters_reach_them_at_step():
    facade, models, opts, stepped = _facade()
    assert len(facade.param_groups) == 1 and len(facade.param_groups[0]["params"]) == 4
    sched = torch.optim.lr_scheduler.StepLR(facade, step_size=1, gamma=0.5)  # an Optimizer to torch
    for m in models:
        m(torch.ones(1, 3)).sum().backward()
    facade.step()
    sched.step()
    assert facade.param_groups[0]["lr"] == 0.05 and opts[1].param_groups[0]["lr"] == 0.1  # not yet
    facade.step()
    assert [o.param_groups[0]["lr"] for o in opts] == [0.05, 0.05] and len(stepped) == 2
    facade.zero_grad()
    assert all(p.grad is None for m in models for p in m.parameters())
    assert repr(facade) == "ReplicatedOptimizer(2 x AdamW)"


def test_a_grad_scaler_unscales_every_replica():
    facade, models, opts, _ = _facade()
    scaler = torch.amp.GradScaler("cpu", init_scale=4.0)
    for m in models:
        scaler.scale(m(torch.ones(1, 3)).sum()).backward()
    scaler.unscale_(facade)
    assert all(torch.equal(m.bias.grad, torch.ones(2)) for m in models)


def test_state_dict_is_replica_0s_and_loads_into_each_without_aliasing():
    facade, models, opts, _ = _facade()
    for m in models:
        m(torch.ones(1, 3)).sum().backward()
    facade.step()
    facade.param_groups[0]["lr"] = 0.3
    sd = facade.state_dict()
    assert sd["param_groups"][0]["lr"] == 0.3 and sd["state"].keys() == opts[0].state_dict()["state"].keys()
    other, _, others, _ = _facade()
    other.load_state_dict(sd)
    assert other.param_groups[0]["lr"] == 0.3
    a, b = (o.state[o.param_groups[0]["params"][0]]["exp_avg"] for o in others)
    assert torch.equal(a, b) and a is not b and a is not sd["state"][0]["exp_avg"]


def test_device_lr_for_graphs_keeps_floats_for_the_user_and_freezes_the_rest():
    facade, models, opts, _ = _facade(capturable=True)
    facade.use_device_lr()
    lr = opts[1].param_groups[0]["lr"]
    assert isinstance(lr, torch.Tensor) and float(lr) == pytest.approx(0.1)
    facade.param_groups[0]["lr"] = 0.02
    facade._sync()
    assert float(opts[0].param_groups[0]["lr"]) == pytest.approx(0.02) and opts[1].param_groups[0]["lr"] is lr
    sd = facade.state_dict()
    assert sd["param_groups"][0]["lr"] == 0.02  # a float, as one device saves it
    sd["param_groups"][0]["lr"] = 0.5
    facade.load_state_dict(sd)
    assert opts[1].param_groups[0]["lr"] is lr and float(lr) == 0.5  # the captured address kept
    facade.param_groups[0]["weight_decay"] = 0.5
    with pytest.raises(ValueError, match=r"param_groups\[0\]\['weight_decay'\]: expected 0.01, the value the CUDA graph"):
        facade.step()
    bad = facade.state_dict()
    with pytest.raises(ValueError, match=r"state_dict\['param_groups'\]\[0\]\['weight_decay'\]"):
        facade.load_state_dict(bad)


def test_one_replica_shares_its_groups():
    facade, models, opts, _ = _facade(n=1)
    assert facade.param_groups is opts[0].param_groups and facade.state is opts[0].state
    sd = facade.state_dict()
    facade.load_state_dict(sd)
    assert facade.param_groups is opts[0].param_groups  # load_state_dict replaced the list: followed
