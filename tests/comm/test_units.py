"""Unit tests of the private modules that run without a GPU: aliasing, reductions, coalescing, checks."""

from __future__ import annotations

import pytest
import torch

import gpucomm.comm as c
from gpucomm.collectives import ReduceOp
from gpucomm.comm import _checks, _copy, _reduce


def test_overlaps_and_protect():
    base = torch.arange(10.0)
    a, b = base[:5], base[5:]
    assert not _copy.overlaps(a, b)
    assert _copy.overlaps(base[2:7], a)
    assert not _copy.overlaps(torch.empty(0), base)
    pairs = _copy.protect([(a, a), (b, base[3:8])], [a, b])
    assert len(pairs) == 1  # the self-copy is dropped
    dst, src = pairs[0]
    assert dst is b and src.data_ptr() != base.data_ptr() + 3 * 4  # the overlapped source was cloned
    assert torch.equal(src, torch.arange(3.0, 8.0))


@pytest.mark.parametrize("op", list(ReduceOp))
def test_stack_and_chain_reductions_agree(monkeypatch, op):
    ts = [torch.arange(1.0, 7.0).reshape(2, 3) * (i + 1) for i in range(4)]
    stacked = _reduce.combine(ts, op)
    monkeypatch.setattr(_reduce, "STACK_MAX_BYTES", 0)
    chained = _reduce.combine(ts, op)
    fresh = _reduce.combine([t.clone() for t in ts], op, out=torch.empty(2, 3))
    assert torch.allclose(stacked, chained) and torch.allclose(stacked, fresh)
    assert all(torch.equal(t, torch.arange(1.0, 7.0).reshape(2, 3) * (i + 1)) for i, t in enumerate(ts))


def test_chain_reduces_in_place_into_an_input(monkeypatch):
    monkeypatch.setattr(_reduce, "STACK_MAX_BYTES", 0)
    ts = [torch.full((4,), float(i)) for i in range(4)]
    r = _reduce.combine(ts, ReduceOp.SUM, out=ts[2])
    assert r is ts[2] and r.tolist() == [6.0] * 4


def test_integer_sums_keep_their_dtype():
    ts = [torch.full((3,), 100, dtype=torch.int32)] * 3
    assert _reduce.combine(ts, ReduceOp.SUM).dtype == torch.int32
    assert c.all_reduce(ts)[0].tolist() == [300, 300, 300]


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


def test_device_lists_are_cached_but_index_less_cuda_is_not():
    first = _checks.devices_arg(["cpu", torch.device("cpu")])
    assert _checks.devices_arg(["cpu", torch.device("cpu")]) == first
    assert not _checks._indexed("cuda") and not _checks._indexed(torch.device("cuda"))
    assert _checks._indexed(0) and _checks._indexed("cuda:1") and _checks._indexed("cpu")
    with pytest.raises(TypeError, match=r"devices\[0\]"):
        _checks.devices_arg([True])  # bool is not a device index, cached or not


def test_complex_tensors_keep_their_dtype():
    z = torch.tensor([1 + 2j, 3 - 1j])
    assert c.gather([z, z]).dtype == torch.complex64
    assert c.all_reduce([z, z], "avg")[0].tolist() == z.tolist()
    with pytest.raises(ValueError, match="undefined for complex"):
        c.all_reduce([z, z], "max")


def test_one_device_fast_paths_return_distinct_correct_tensors():
    n = 3
    lists = [[torch.full((2,), 10.0 * i + j) for j in range(n)] for i in range(n)]
    got = c.all_to_all(lists)
    assert all(torch.equal(got[j][i], lists[i][j]) for i in range(n) for j in range(n))
    got[0][1].add_(100)
    assert lists[1][0].tolist() == [10.0, 10.0]  # results are copies, not the inputs
    ring = c.send_recv([torch.full((2,), float(i)) for i in range(n)])
    assert [r[0].item() for r in ring] == [2.0, 0.0, 1.0]
    pieces = c.reduce_scatter([torch.arange(6.0)] * n)
    assert [p.tolist() for p in pieces] == [[0.0, 3.0], [6.0, 9.0], [12.0, 15.0]]
