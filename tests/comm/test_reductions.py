"""gpucomm.comm._reductions: the bad-input probes (issue 13) get one clear error, before anything is written."""

from __future__ import annotations

import warnings

import pytest
import torch

import gpucomm.comm as c
from gpucomm.testing import requires_gpus


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
    # Above REDUCE_STACK_MAX_BYTES (per input) the stack's (3n+1) x size bytes lose to the chain's 3(n-1) x size (the
    # H200's 32 MiB reduce): the binder then allocates no scratch and chains in place, same result.
    from gpucomm.collectives import ReduceOp
    from gpucomm.comm import _reduce, _reductions

    ts = [torch.full((64,), float(i + 1)) for i in range(4)]
    assert _reductions.bind_stacked(ts, ts[0], ReduceOp.SUM) is not None
    monkeypatch.setattr(_reduce, "REDUCE_STACK_MAX_BYTES", 64 * 4 - 1)
    assert _reductions.bind_stacked(ts, ts[0], ReduceOp.SUM) is None
    run = _reductions.bind_reduce(ts, ts[0], ReduceOp.SUM)
    run()
    assert torch.equal(ts[0], torch.full((64,), 10.0))



@pytest.mark.parametrize("winner", ["stacked", "chained"])
@pytest.mark.parametrize("collective", ["reduce", "all_reduce"])
def test_a_timed_prepared_reduction_binds_the_faster_strategy_and_writes_nothing_while_timing(monkeypatch, winner,
                                                                                                collective):
    """Where the faster strategy depends on the machine (gpucomm.comm._reduce.times_routes: CUDA tensors between 2
    and 32 MiB each; made true here for small CPU tensors) a prepared reduction times both on clones of its tensors
    and binds the faster; the timer is injected: it runs what it is given and says the winner took less time."""
    from gpucomm.collectives import ReduceOp
    from gpucomm.comm import _reduce, _reductions

    monkeypatch.setattr(_reduce, "times_routes", lambda first: True)
    ts = [torch.full((8,), float(i + 1)) for i in range(4)]
    timed: list[torch.Tensor] = []
    real_stack = torch.stack

    def stack(tensors, *args, **kwargs):
        timed.extend(tensors)
        return real_stack(tensors, *args, **kwargs)

    monkeypatch.setattr(torch, "stack", stack)
    kinds = []

    def timer(run, calls):
        before = len(timed)
        for _ in range(calls):
            run()
        kind = "stacked" if len(timed) > before else "chained"
        kinds.append(kind)
        return 1.0 if kind == winner else 2.0

    rest = ts[1:] if collective == "all_reduce" else None
    run = _reductions.bind_one_device(ts, ts[0], ReduceOp.SUM, rest, timer=timer)
    assert set(kinds) == {"stacked", "chained"}  # both were timed ...
    assert all(torch.equal(t, torch.full((8,), float(i + 1))) for i, t in enumerate(ts))  # ... on clones
    assert not any(t is u for t in timed for u in ts)
    timed.clear()
    run()
    assert (len(timed) > 0) == (winner == "stacked")  # the winner was bound
    assert torch.equal(ts[0], torch.full((8,), 10.0))
    if collective == "all_reduce":
        assert all(torch.equal(t, torch.full((8,), 10.0)) for t in ts)


def test_a_prepared_communicator_reduce_in_the_timed_band_times_once_and_is_right(monkeypatch):
    from gpucomm.comm import _reduce
    from gpucomm.communicator import LocalCommunicator

    monkeypatch.setattr(_reduce, "times_routes", lambda first: True)
    timers: list[torch.device] = []
    real = _reduce.wall_timer

    def wall_timer(device):
        timers.append(device)
        return real(device)

    monkeypatch.setattr(_reduce, "wall_timer", wall_timer)
    comm = LocalCommunicator(["cpu"] * 3)
    ts = [torch.full((5,), float(i + 1)) for i in range(3)]
    p = comm.prepare("reduce", ts, 1, "max")
    assert timers == [torch.device("cpu")] and ts[1].tolist() == [2.0] * 5
    p()
    p()
    assert timers == [torch.device("cpu")] and ts[1].tolist() == [3.0] * 5


@requires_gpus(1)
@pytest.mark.parametrize("collective", ["reduce", "all_reduce"])
def test_a_prepared_cuda_reduction_in_the_timed_band_leaves_the_tensors_alone_until_called(collective):
    from gpucomm.communicator import LocalCommunicator

    comm = LocalCommunicator(["cuda:0"] * 3)
    ts = [torch.full((1 << 20,), float(i + 1), device="cuda:0") for i in range(3)]  # 4 MiB each: timed
    p = comm.prepare(collective, ts, *((0, "sum") if collective == "reduce" else ("sum",)))
    assert all(torch.equal(t, torch.full_like(t, float(i + 1))) for i, t in enumerate(ts))
    p()
    assert torch.equal(ts[0], torch.full_like(ts[0], 6.0))


def test_a_timed_prepared_reduction_without_room_for_its_clones_follows_the_rule(monkeypatch):
    from gpucomm.collectives import ReduceOp
    from gpucomm.comm import _reduce, _reductions

    monkeypatch.setattr(_reduce, "times_routes", lambda first: True)
    ts = [torch.full((8,), float(i + 1)) for i in range(4)]

    def no_room(self, *args, **kwargs):
        raise torch.cuda.OutOfMemoryError("CUDA out of memory (a test)")

    monkeypatch.setattr(torch.Tensor, "clone", no_room)
    timed = []
    run = _reductions.bind_one_device(ts, ts[0], ReduceOp.SUM, timer=lambda r, k: timed.append(r) or 1.0)
    monkeypatch.undo()
    assert timed == [] and run.__name__ == "run"  # 32 B inputs: the rule stacks (the stacked run), untimed
    run()
    assert torch.equal(ts[0], torch.full((8,), 10.0))
