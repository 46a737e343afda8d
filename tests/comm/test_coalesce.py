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
