"""gpucomm.comm._reductions: the bad-input probes (issue 13) get one clear error, before anything is written."""

from __future__ import annotations

import warnings

import pytest
import torch

import gpucomm.comm as c


def test_zero_size_reduce_scatter_gives_one_empty_chunk_per_participant():
    for n in (1, 2, 3):
        got = c.reduce_scatter([torch.ones(0, 3)] * n)
        assert [tuple(t.shape) for t in got] == [(0, 3)] * n
        outs = [torch.empty(0, 3) for _ in range(n)]
        assert c.reduce_scatter([torch.ones(0, 3)] * n, out=outs) == outs
    got = c.reduce_scatter([torch.ones(2, 0)] * 2)  # zero-size, but dim 0 splits
    assert [tuple(t.shape) for t in got] == [(1, 0)] * 2


def test_all_reduce_out_partly_overlapping_an_input_is_refused_untouched():
    x = torch.arange(8.0)
    before = x.clone()
    other = torch.zeros(4)
    with pytest.raises(ValueError, match=r"^out\[0\]: expected a tensor disjoint from tensors\[0\] or exactly"):
        c.all_reduce([x[:4], x[4:]], out=[x[2:6], other])
    assert torch.equal(x, before) and torch.equal(other, torch.zeros(4))
    ts = [torch.ones(4), torch.ones(4)]
    c.all_reduce(ts, out=ts)  # exactly the inputs: in place, still allowed
    assert torch.equal(ts[0], torch.full((4,), 2.0))


@pytest.mark.parametrize("fn", ["all_reduce", "reduce", "reduce_scatter", "reduce_add"])
def test_unsigned_dtypes_torch_cannot_reduce_are_named(fn):
    ts = [torch.ones(4, dtype=torch.uint64)] * 2
    args = {"all_reduce": (ts,), "reduce": (ts, "cpu"), "reduce_scatter": (ts,), "reduce_add": (ts,)}[fn]
    with pytest.raises(ValueError, match=r"^(tensors|inputs)\[0\]: expected a dtype torch can reduce .* t\.to\(torch\.int64\)$"):
        getattr(c, fn)(*args)
    assert torch.equal(c.broadcast(ts[0], ["cpu", "cpu"])[1], ts[0])  # moving them is fine


def test_nested_tensors_are_named():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's prototype warning for nested tensors
        nt = torch.nested.nested_tensor([torch.ones(2), torch.ones(3)])
    with pytest.raises(ValueError, match=r"^tensors\[0\]: expected a regular tensor .*nested tensor\(2 components"):
        c.all_reduce([nt, nt], out=[nt, nt])
    with pytest.raises(ValueError, match=r"^tensors\[1\]: expected a regular tensor"):
        c.gather([torch.ones(2), nt])


def test_out_with_tensors_that_require_grad_is_named():
    leaf = torch.ones(3, requires_grad=True)
    outs = [torch.zeros(3), torch.zeros(3)]
    with pytest.raises(ValueError, match=r"^tensors\[0\]: expected a tensor that does not require grad when out="):
        c.all_reduce([leaf, torch.ones(3)], out=outs)
    assert all(torch.equal(o, torch.zeros(3)) for o in outs)
    with pytest.raises(ValueError, match=r"^tensors\[1\]: expected a tensor that does not require grad"):
        c.all_gather([torch.ones(3), leaf], out=[torch.zeros(6), torch.zeros(6)])
    with pytest.raises(ValueError, match=r"^out: expected a tensor that does not require grad"):
        c.gather([torch.ones(3)] * 2, out=torch.zeros(6, requires_grad=True))
    with torch.no_grad():  # no autograd: nothing to refuse
        c.all_reduce([leaf, torch.ones(3)], out=outs)
    assert torch.equal(outs[1], torch.full((3,), 2.0))
    assert c.all_reduce([leaf, torch.ones(3)])[0].requires_grad  # without out=, autograd works as in torch


def test_bound_reduce_stacks_only_while_the_stack_is_small(monkeypatch):
    # Above STACK_MAX_BYTES (per input) the stack's (3n+1) x size bytes lose to the chain's 3(n-1) x size (the
    # H200's 32 MiB reduce): the binder then allocates no scratch and chains in place, same result.
    from gpucomm.collectives import ReduceOp
    from gpucomm.comm import _reduce, _reductions

    ts = [torch.full((64,), float(i + 1)) for i in range(4)]
    assert _reductions.bind_stacked(ts, ts[0], ReduceOp.SUM) is not None
    monkeypatch.setattr(_reduce, "STACK_MAX_BYTES", 64 * 4 - 1)
    assert _reductions.bind_stacked(ts, ts[0], ReduceOp.SUM) is None
    run = _reductions.bind_reduce(ts, ts[0], ReduceOp.SUM)
    run()
    assert torch.equal(ts[0], torch.full((64,), 10.0))

