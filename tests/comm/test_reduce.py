"""gpucomm.comm._reduce: the stack and chain reductions, in place and out of place."""

from __future__ import annotations

import pytest
import torch

import gpucomm.comm as c
from gpucomm.collectives import ReduceOp
from gpucomm.comm import _reduce


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


def test_complex_tensors_keep_their_dtype():
    z = torch.tensor([1 + 2j, 3 - 1j])
    assert c.gather([z, z]).dtype == torch.complex64
    assert c.all_reduce([z, z], "avg")[0].tolist() == z.tolist()
    with pytest.raises(ValueError, match="undefined for complex"):
        c.all_reduce([z, z], "max")


@pytest.mark.parametrize("stack_max", [None, 0])
def test_half_precision_avg_does_not_overflow(monkeypatch, stack_max):
    if stack_max is not None:
        monkeypatch.setattr(_reduce, "STACK_MAX_BYTES", stack_max)
    ts = [torch.full((4,), 1000.0, dtype=torch.float16) for _ in range(70)]  # the sum, 70000, is not a float16
    assert _reduce.combine(ts, ReduceOp.AVG).tolist() == [1000.0] * 4


def test_all_reduce_stacks_up_to_its_limit_and_chains_above_it():
    # 4 x 4 MiB float32 = 16 MiB stacked: above both 8 MiB limits (the mechanics: _reduce's docstrings)
    assert _reduce.stack_max_bytes("reduce") == _reduce.STACK_MAX_BYTES == 8 << 20
    assert _reduce.stack_max_bytes("reduce_scatter") == _reduce.STACK_MAX_BYTES
    assert _reduce.stack_max_bytes("all_reduce") == _reduce.ALL_REDUCE_STACK_MAX_BYTES == 8 << 20
    ts = [torch.full((1 << 20,), float(i + 1)) for i in range(4)]
    stacks = []
    real_stack = torch.stack

    def counting_stack(*args, **kwargs):
        stacks.append(1)
        return real_stack(*args, **kwargs)

    import unittest.mock
    with unittest.mock.patch.object(torch, "stack", counting_stack):
        assert torch.equal(_reduce.combine(ts, ReduceOp.SUM, collective="all_reduce"), torch.full((1 << 20,), 10.0))
        outs = c.all_reduce(ts)
        assert stacks == [] and all(torch.equal(o, torch.full((1 << 20,), 10.0)) for o in outs)
        small = [torch.full((1 << 18,), float(i + 1)) for i in range(4)]  # 4 MiB stacked
        assert torch.equal(c.all_reduce(small)[3], torch.full((1 << 18,), 10.0))
        assert stacks == [1]


@pytest.mark.parametrize("op,want", [("sum", 10.0), ("avg", 2.5), ("max", 4.0), ("min", 1.0), ("prod", 24.0)])
@pytest.mark.parametrize("where", ["in_place", "distinct", "new"])
def test_chained_all_reduce_in_one_pass(monkeypatch, op, want, where):
    # above the limit the one-pass route chains into out[0] (in place on tensors[0], or a fresh output)
    monkeypatch.setattr(_reduce, "ALL_REDUCE_STACK_MAX_BYTES", 0)
    ts = [torch.full((5,), float(i + 1)) for i in range(4)]
    out = ts if where == "in_place" else [torch.zeros(5) for _ in ts] if where == "distinct" else None
    res = c.all_reduce(ts, op, out=out)
    assert len(res) == 4 and all(torch.allclose(r, torch.full((5,), want)) for r in res)
    if out is not None:
        assert all(r is o for r, o in zip(res, out, strict=True))
    else:
        assert ts[0].tolist() == [1.0] * 5  # the inputs are left alone


def test_chained_all_reduce_refuses_before_writing(monkeypatch):
    monkeypatch.setattr(_reduce, "ALL_REDUCE_STACK_MAX_BYTES", 0)
    ts = [torch.ones(3), torch.ones(4)]
    outs = [torch.full((3,), 7.0), torch.full((3,), 7.0)]
    with pytest.raises(ValueError, match=r"tensors\[1\]"):
        c.all_reduce(ts, out=outs)
    assert all(o.tolist() == [7.0] * 3 for o in outs)
    shared = torch.zeros(6)
    with pytest.raises(ValueError):
        c.all_reduce([torch.ones(3), torch.ones(3)], out=[shared[:3], shared[2:5]])
    assert shared.tolist() == [0.0] * 6


def test_bound_all_reduce_uses_all_reduces_limit_and_bound_reduce_reduces(monkeypatch):
    from gpucomm.comm import _reductions

    ts = [torch.full((64,), float(i + 1)) for i in range(4)]  # 1 KiB stacked
    monkeypatch.setattr(_reduce, "STACK_MAX_BYTES", 512)
    assert _reductions.bind_stacked(ts, ts[0], ReduceOp.SUM) is None
    assert _reductions.bind_stacked(ts, ts[0], ReduceOp.SUM, rest=ts[1:]) is not None
    monkeypatch.setattr(_reduce, "ALL_REDUCE_STACK_MAX_BYTES", 512)
    monkeypatch.setattr(_reduce, "STACK_MAX_BYTES", 8 << 20)
    assert _reductions.bind_stacked(ts, ts[0], ReduceOp.SUM, rest=ts[1:]) is None
    assert _reductions.bind_stacked(ts, ts[0], ReduceOp.SUM) is not None
