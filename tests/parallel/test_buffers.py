"""gpucomm.parallel.buffers: replica 0's buffers into every replica, by prepared broadcasts made once."""

import copy

import torch
from torch import nn

from gpucomm.communicator import LocalCommunicator
from gpucomm.parallel.buffers import BufferSync, module_tensors


def test_replica_0s_buffers_reach_every_replica():
    base = nn.Sequential(nn.BatchNorm1d(4), nn.Linear(4, 2))
    replicas = [base] + [copy.deepcopy(base) for _ in range(2)]
    for r, m in enumerate(replicas):
        m(torch.randn(5, 4) + r)
    sync = BufferSync(replicas, LocalCommunicator(["cpu"] * 3), None)
    assert sync and len(module_tensors(base)) == 3
    sync()
    for m in replicas[1:]:
        assert all(torch.equal(a, b) for a, b in zip(module_tensors(m), module_tensors(base), strict=True))
    assert not BufferSync([nn.Linear(2, 2)] * 2, LocalCommunicator(["cpu"] * 2), None)  # nothing to copy
