"""gpucomm.comm._kernels (the seam): each kernel does what its public function does, into given outputs."""

from __future__ import annotations

import torch

import gpucomm.comm as c
from gpucomm.collectives import ReduceOp
from gpucomm.comm import _kernels as k


def _ts(n=3):
    return [torch.arange(6.0).reshape(6, 1) * (p + 1) for p in range(n)]


def test_kernels_match_the_public_functions():
    ts = _ts()
    outs = [torch.empty(6, 1) for _ in ts]
    k.all_reduce(ts, outs, ReduceOp.MAX)
    assert all(torch.equal(o, c.all_reduce(ts, "max")[0]) for o in outs)
    out = torch.empty(6, 1)
    k.reduce(ts, out, ReduceOp.SUM)
    assert torch.equal(out, c.reduce(ts, "cpu"))
    outs = [torch.empty(2, 1) for _ in ts]
    k.reduce_scatter(ts, outs, ReduceOp.SUM)
    assert all(torch.equal(a, b) for a, b in zip(outs, c.reduce_scatter(ts), strict=True))
    outs = [torch.empty(18, 1) for _ in ts]
    k.all_gather(ts, outs)
    assert all(torch.equal(o, torch.cat(ts)) for o in outs)
    outs = [torch.empty(2, 1) for _ in ts]
    k.scatter(ts[1], outs)
    assert all(torch.equal(a, b) for a, b in zip(outs, ts[1].chunk(3), strict=True))
    out = torch.empty(18, 1)
    k.gather(ts, out)
    assert torch.equal(out, torch.cat(ts))
    outs = [torch.empty(6, 1) for _ in ts]
    k.broadcast(ts[2], outs)
    assert all(torch.equal(o, ts[2]) for o in outs)
    outs = [torch.empty(6, 1) for _ in ts]
    k.send_recv(ts, outs)
    assert all(torch.equal(outs[i], ts[i - 1]) for i in range(3))
    dsts = [torch.empty(2, 1) for _ in range(9)]
    srcs = [ts[i].chunk(3)[j] for j in range(3) for i in range(3)]
    k.all_to_all(dsts, srcs)
    assert all(torch.equal(a, b) for a, b in zip(dsts, srcs, strict=True))


def test_binders_decide_once_and_rerun():
    ts = _ts()
    outs = [torch.empty(6, 1) for _ in ts]
    run = k.bind_broadcast(ts[0], [ts[0], *outs])  # the source itself is skipped
    run()
    ts[0].add_(1)
    run()
    assert all(torch.equal(o, ts[0]) for o in outs)
    assert k.bind_broadcast(ts[0], [ts[0]]) is k.noop
    src = torch.arange(6.0)
    assert k.bind_scatter(src, list(src.split(2))) is k.noop  # every output is its own chunk already
    out = torch.empty(18, 1)
    g = k.bind_gather(ts, out)
    ts[1].zero_()
    g()
    assert torch.equal(out, torch.cat(ts))


def test_bound_reduce_stacks_only_while_the_stack_is_small(monkeypatch):
    # Above STACK_MAX_BYTES the stack's (3n+1) x size bytes lose to the chain's 3(n-1) x size (the
    # H200's 8 MiB reduce): the binder then allocates no scratch and chains in place, same result.
    from gpucomm.collectives import ReduceOp
    from gpucomm.comm import _kernels, _reduce

    ts = [torch.full((64,), float(i + 1)) for i in range(4)]
    assert _kernels._bind_stacked(ts, ts[0], ReduceOp.SUM) is not None
    monkeypatch.setattr(_reduce, "STACK_MAX_BYTES", 4 * 64 * 4 - 1)
    assert _kernels._bind_stacked(ts, ts[0], ReduceOp.SUM) is None
    run = _kernels.bind_reduce(ts, ts[0], ReduceOp.SUM)
    run()
    assert torch.equal(ts[0], torch.full((64,), 10.0))
