"""gpucomm.parallel.reducer: bucket views, prepared collectives made once, in-order launches from the hooks."""

import copy

import torch
from torch import nn

from gpucomm.communicator import LocalCommunicator
from gpucomm.parallel.reducer import GradientReducer

CPU3 = ["cpu"] * 3


def _replicas(n=3):
    torch.manual_seed(0)
    base = nn.Sequential(*[nn.Linear(16, 16) for _ in range(6)])
    return [base] + [copy.deepcopy(base) for _ in range(n - 1)]


class _Counting(LocalCommunicator):
    def __init__(self, devices):
        super().__init__(devices)
        self.prepared, self.runs = [], []

    def prepare(self, op, /, tensors, *args, **kwargs):
        self.prepared.append(op)
        inner = super().prepare(op, tensors, *args, **kwargs)
        return lambda: (self.runs.append(op), inner())[1]


def test_views_buckets_and_prepared_once():
    models = _replicas()
    comm = _Counting(CPU3)
    red = GradientReducer([list(m.parameters()) for m in models], comm, None, cap_bytes=1000, first_cap_bytes=500)
    assert len(red.buckets) > 4 and comm.prepared == ["all_reduce"] * len(red.buckets)
    for r, m in enumerate(models):
        for i, p in enumerate(m.parameters()):
            flat = red.buffers[r][red._bucket_of[i]]
            assert p.grad.untyped_storage().data_ptr() == flat.untyped_storage().data_ptr()
    order = []
    launch = red._launch
    red._launch = lambda b: (order.append(b), launch(b))[1]
    for step in range(2):
        red.prepare_for_backward(sync=True)
        sum(m(torch.full((2, 16), float(r + 1))).sum() for r, m in enumerate(models)).backward()
        assert order == list(range(len(red.buckets))) * (step + 1)  # every bucket once, in order, from the hooks
    assert comm.prepared == ["all_reduce"] * len(red.buckets)  # never again after construction
    grads = [[p.grad for p in m.parameters()] for m in models]
    assert all(torch.equal(a, b) for g in grads[1:] for a, b in zip(g, grads[0], strict=True))


def test_no_sync_accumulates_and_unused_parameters_get_none():
    models = _replicas()
    red = GradientReducer([list(m.parameters()) for m in models], LocalCommunicator(CPU3), None,
                          cap_bytes=10 ** 6, first_cap_bytes=10 ** 6)
    red.prepare_for_backward(sync=False)
    sum(m[0](torch.ones(1, 16) * (r + 1)).sum() for r, m in enumerate(models)).backward()
    assert float(models[0][0].bias.grad[0]) == 1.0 and float(models[2][0].bias.grad[0]) == 1.0  # local only
    red.prepare_for_backward(sync=True)
    sum(m[0](torch.ones(1, 16)).sum() for m in models).backward()
    assert float(models[1][0].bias.grad[0]) == 2.0  # (1 + 1), averaged over replicas whose local sums are equal
    assert all(m[5].weight.grad is None for m in models)  # no replica used layer 5: None, as on one device
    red.zero_grad()
    assert not red.any_grad() and all(m[5].weight.grad is not None and not m[5].weight.grad.any() for m in models)
    red.close()
    assert red._hooks == []
