"""Test doubles for the bench: a plain-torch reference LocalCommunicator and a deliberately broken one.

The reference is written straight from the Communicator contract (copies and sums, one participant
after another), so the bench's check can be exercised without the real implementations; the broken
one adds 1 to every all_reduce result, which the check must catch.
"""

from __future__ import annotations

import torch

from gpucomm.bench.adapters import Adapter
from gpucomm.bench.backends import BACKENDS
from gpucomm.collectives import ReduceOp, parse_op


def _combine(values: list[torch.Tensor], op) -> torch.Tensor:
    op = parse_op(op)
    acc = values[0].clone()
    for v in values[1:]:
        v = v.to(acc.device)
        if op in (ReduceOp.SUM, ReduceOp.AVG):
            acc += v
        elif op is ReduceOp.PROD:
            acc *= v
        elif op is ReduceOp.MAX:
            acc = torch.maximum(acc, v)
        else:
            acc = torch.minimum(acc, v)
    return acc / len(values) if op is ReduceOp.AVG else acc


class ReferenceCommunicator:
    """Every Communicator operation for participants held in one process, by plain copies."""

    def __init__(self, devices):
        self.devices = list(devices)
        self.n = len(self.devices)

    def broadcast(self, tensors, root=0):
        src = tensors[root].clone()
        for t in tensors:
            t.copy_(src)

    def reduce(self, tensors, root=0, op="sum"):
        tensors[root].copy_(_combine(list(tensors), op))

    def all_reduce(self, tensors, op="sum"):
        result = _combine(list(tensors), op)
        for t in tensors:
            t.copy_(result)

    def all_gather(self, outputs, inputs):
        full = torch.cat([i.cpu() for i in inputs])
        for o in outputs:
            o.copy_(full)

    def reduce_scatter(self, outputs, inputs, op="sum"):
        result = _combine([i.clone() for i in inputs], op)
        for q, o in enumerate(outputs):
            o.copy_(result.chunk(self.n)[q])

    def scatter(self, outputs, inputs, root=0):
        for q, o in enumerate(outputs):
            o.copy_(inputs[root].chunk(self.n)[q])

    def gather(self, outputs, inputs, root=0):
        outputs[root].copy_(torch.cat([i.cpu() for i in inputs]))

    def all_to_all(self, outputs, inputs):
        for j, o in enumerate(outputs):
            o.copy_(torch.cat([inputs[i].chunk(self.n)[j].cpu() for i in range(self.n)]))

    def all_to_all_v(self, outputs, inputs, split_sizes):
        for j, o in enumerate(outputs):
            o.copy_(torch.cat([inputs[i].split(split_sizes[i])[j].cpu() for i in range(self.n)]))

    def send_recv(self, outputs, inputs):
        for i, o in enumerate(outputs):
            o.copy_(inputs[(i - 1) % self.n])

    def synchronize(self):
        pass

    def barrier(self):
        pass


class BrokenCommunicator(ReferenceCommunicator):
    """all_reduce results are off by one: the bench must report #wrong > 0 and exit 1."""

    def all_reduce(self, tensors, op="sum"):
        super().all_reduce(tensors, op)
        for t in tensors:
            t.add_(1)


class ReferenceBackend(Adapter):
    """A bench adapter over :class:`ReferenceCommunicator`, posing as ``gpucomm.comm`` (plain calls only)."""

    spec = BACKENDS["gpucomm.comm"]
    communicator = ReferenceCommunicator

    def __init__(self, devices):
        super().__init__(self.communicator(devices), devices, range(len(devices)), len(devices))


class PreparingCommunicator(ReferenceCommunicator):
    """The reference with a ``prepare(op, *args, **kwargs)`` that counts how often it was asked."""

    prepared = 0

    def prepare(self, op, /, *args, **kwargs):
        type(self).prepared += 1
        method = getattr(self, op)
        return lambda: method(*args, **kwargs)


class PreparingBackend(ReferenceBackend):
    communicator = PreparingCommunicator


class BrokenBackend(ReferenceBackend):
    communicator = BrokenCommunicator
