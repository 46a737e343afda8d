"""gpucomm.comm._coalesce: buckets, order, sparse tensors and version counters."""

from __future__ import annotations

import torch

import gpucomm.comm as c


def test_coalesced_outputs_have_their_own_version_counters_and_order():
    ts = [torch.arange(3.0), torch.arange(2, dtype=torch.int64), torch.ones(2, 2)]
    out = c.broadcast_coalesced(ts, ["cpu", "cpu"], buffer_size=1 << 20)
    assert out[0][0] is ts[0]
    copies = out[1]
    assert [x.dtype for x in copies] == [x.dtype for x in ts]
    before = copies[2]._version
    copies[0].add_(1)
    assert copies[2]._version == before  # an in-place change to one copy is not a change to another


def test_coalesced_sparse_travels_and_sums():
    s = torch.tensor([[0.0, 2.0], [3.0, 0.0]]).to_sparse()
    out = c.broadcast_coalesced([s, torch.arange(2.0)], ["cpu", "cpu"])
    assert out[1][0].is_sparse and torch.equal(out[1][0].to_dense(), s.to_dense())
    sums = c.reduce_add_coalesced([[s, torch.arange(2.0)], [s, torch.arange(2.0)]], "cpu")
    assert isinstance(sums, tuple) and torch.equal(sums[0].to_dense(), 2 * s.to_dense())
    assert sums[1].tolist() == [0.0, 2.0]


def test_dense_buckets_match_torch_take_tensors():
    from torch._utils import _take_tensors

    from gpucomm.comm._coalesce import _dense_buckets

    gen = torch.Generator().manual_seed(0)
    for trial in range(40):
        sizes = torch.randint(1, 50, (int(torch.randint(1, 12, (1,), generator=gen)),), generator=gen).tolist()
        ts = [torch.zeros(s) for s in sizes]
        limit = int(torch.randint(1, 400, (1,), generator=gen))
        want = [[id(t) for t in b] for b in _take_tensors(ts, limit)]
        got = [[id(t) for t in b] for b in _dense_buckets(ts, limit)]
        assert got == want, (trial, sizes, limit)
    assert _dense_buckets([torch.zeros(2), torch.zeros(2, dtype=torch.int64)], 100) is None  # two types
    assert _dense_buckets([torch.zeros(2).to_sparse()], 100) is None
