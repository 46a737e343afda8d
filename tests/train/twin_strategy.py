"""A small in-process data-parallel strategy for testing the harness without ``replicated``.

``TwinStrategy`` keeps one model copy per device, runs each shard's forward/backward in turn, averages
the gradients by hand (sum over copies / n) and steps every copy's optimizer: the textbook algorithm,
short enough to be obviously right.  ``reduce=False`` skips the averaging (copies drift apart) and
``average=False`` sums without dividing (copies agree, wrongly) — the two bugs the equality checks
must catch.  Register it with ``monkeypatch.setitem(strategies.STRATEGIES, name, cls)``.
"""

from __future__ import annotations

import torch

from gpucomm.train.strategies.base import (
    StepResult,
    Strategy,
    call_model,
    make_optimizer,
    parameter_state,
    split_batch,
    to_device,
)
from gpucomm.train.strategies.losses import scalar_loss


class TwinStrategy(Strategy):
    name = "twin"
    reduce = True
    average = True

    @classmethod
    def notes(cls, config):
        return ["twin: a test strategy"]

    def prepare(self, workload):
        self.workload = workload
        self.copies = [workload.build_model().to(d) for d in self.devices]
        self.optimizers = [make_optimizer(m.parameters(), d, self.config)
                           for m, d in zip(self.copies, self.devices, strict=True)]

    def step(self, step, batch):
        shards = split_batch(batch, len(self.copies), self.config.global_batch)
        losses = []
        for model, device, shard in zip(self.copies, self.devices, shards, strict=True):
            with self.host_phase("forward"):
                inputs, targets = (to_device(x, device) for x in shard)
                loss = scalar_loss(self.workload.loss_fn(call_model(model, inputs), targets))
            with self.host_phase("backward"):
                loss.backward()
            losses.append(loss.detach())
        if self.reduce:
            with self.host_phase("reduce"):
                for params in zip(*(m.parameters() for m in self.copies), strict=True):
                    total = sum(p.grad for p in params)
                    if self.average:
                        total = total / len(params)
                    for p in params:
                        p.grad = total.clone()
        for opt in self.optimizers:
            opt.step()
            opt.zero_grad(set_to_none=True)
        return StepResult(loss=torch.stack(losses).mean())

    def state(self):
        return parameter_state(self.copies[0])

    def invariants(self):
        ref = self.copies[0].state_dict()
        return [f"copy {r} differs in {k!r}" for r, m in enumerate(self.copies[1:], 1)
                for k, v in m.state_dict().items() if not torch.equal(v, ref[k])]


class UnreducedTwin(TwinStrategy):
    name = "twin-unreduced"
    reduce = False


class UnaveragedTwin(TwinStrategy):
    name = "twin-unaveraged"
    average = False
