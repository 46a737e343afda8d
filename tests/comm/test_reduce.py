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
    monkeypatch.setattr(_reduce, "REDUCE_STACK_MAX_BYTES", 0)
    chained = _reduce.combine(ts, op)
    fresh = _reduce.combine([t.clone() for t in ts], op, out=torch.empty(2, 3))
    assert torch.allclose(stacked, chained) and torch.allclose(stacked, fresh)
    assert all(torch.equal(t, torch.arange(1.0, 7.0).reshape(2, 3) * (i + 1)) for i, t in enumerate(ts))


def test_chain_reduces_in_place_into_an_input(monkeypatch):
    monkeypatch.setattr(_reduce, "REDUCE_STACK_MAX_BYTES", 0)
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
        monkeypatch.setattr(_reduce, "REDUCE_STACK_MAX_BYTES", stack_max)
    ts = [torch.full((4,), 1000.0, dtype=torch.float16) for _ in range(70)]  # the sum, 70000, is not a float16
    assert _reduce.combine(ts, ReduceOp.AVG).tolist() == [1000.0] * 4


def _strategies(monkeypatch) -> list[str]:
    """Record which strategy the reductions take: "stack" per torch.stack call, "chain" per chain call (a bound
    chain's run included)."""
    taken: list[str] = []
    real_stack, real_chain, real_bind = torch.stack, _reduce.chain, _reduce.bind_chain

    def stack(*args, **kwargs):
        taken.append("stack")
        return real_stack(*args, **kwargs)

    def chain(*args, **kwargs):
        taken.append("chain")
        return real_chain(*args, **kwargs)

    def bind_chain(*args, **kwargs):
        run = real_bind(*args, **kwargs)
        return None if run is None else (lambda: (taken.append("chain"), run()))

    monkeypatch.setattr(torch, "stack", stack)
    monkeypatch.setattr(_reduce, "chain", chain)
    monkeypatch.setattr(_reduce, "bind_chain", bind_chain)
    return taken


def test_the_shipped_limits_are_4_mib_of_one_input_for_reduce_and_8_mib_for_the_others():
    # reduce: REDUCE_STACK_MAX_BYTES's docstring (the stack lost to torch's reduce_add at 8 MiB per input on four
    # H200 machines, the chain never did); reduce_scatter and all_reduce: STACK_MAX_BYTES's (stack_vs_chain,
    # 4 x cuda:0: stacked ahead at 2 and 8 MiB each, the chain ahead at 32 MiB each)
    assert _reduce.REDUCE_STACK_MAX_BYTES == 4 << 20
    assert _reduce.STACK_MAX_BYTES == _reduce.ALL_REDUCE_STACK_MAX_BYTES == 8 << 20
    for collective, limit in (("reduce", 4 << 20), ("reduce_scatter", 8 << 20), ("all_reduce", 8 << 20)):
        assert _reduce.stacks(collective, limit) and not _reduce.stacks(collective, limit + 1)


_LIMITS = {"all_reduce": 8 << 20, "reduce_scatter": 8 << 20, "communicator_all_reduce": 8 << 20,
           "prepared_all_reduce": 8 << 20}  # every other route is a reduce's: 4 MiB


@pytest.mark.parametrize("route", ["combine", "reduce", "all_reduce", "reduce_scatter", "communicator_reduce",
                                   "communicator_all_reduce", "prepared_reduce", "prepared_all_reduce"])
@pytest.mark.parametrize("above,want", [(0, "stack"), (16, "chain")])
def test_every_route_stacks_inputs_up_to_its_limit_and_chains_above(monkeypatch, route, above, want):
    # 4 inputs of exactly the limit each stack; four float32 more each (so reduce_scatter still divides) and
    # they chain, on every route:
    # gpucomm.comm's plain calls and the LocalCommunicator's plain and prepared calls agree
    from gpucomm.communicator import LocalCommunicator

    each = _LIMITS.get(route, 4 << 20) + above
    ts = [torch.full((each // 4,), float(i + 1)) for i in range(4)]
    comm = LocalCommunicator(["cpu"] * 4)
    taken = _strategies(monkeypatch)
    if route == "combine":
        got = _reduce.combine(ts, ReduceOp.SUM)
    elif route == "reduce":
        got = c.reduce(ts, None, out=torch.empty_like(ts[0]))
    elif route == "all_reduce":
        got = c.all_reduce(ts, out=[torch.empty_like(t) for t in ts])[3]
    elif route == "reduce_scatter":
        got = torch.cat(c.reduce_scatter(ts))
    else:
        name = route.split("_", 1)[1]
        args = (ts, 0, "sum") if name == "reduce" else (ts, "sum")
        if route.startswith("communicator"):
            getattr(comm, name)(*args)
        else:  # the strategy is bound at prepare time and taken when the prepared call runs
            comm.prepare(name, *args)()
        got = ts[0]
    monkeypatch.undo()
    assert want in taken and ("chain" if want == "stack" else "stack") not in taken, taken
    assert got[0].item() == got[-1].item() == 10.0


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

    ts = [torch.full((64,), float(i + 1)) for i in range(4)]  # 256 B each
    monkeypatch.setattr(_reduce, "REDUCE_STACK_MAX_BYTES", 255)
    assert _reductions.bind_stacked(ts, ts[0], ReduceOp.SUM) is None
    assert _reductions.bind_stacked(ts, ts[0], ReduceOp.SUM, rest=ts[1:]) is not None
    monkeypatch.setattr(_reduce, "ALL_REDUCE_STACK_MAX_BYTES", 255)
    monkeypatch.setattr(_reduce, "REDUCE_STACK_MAX_BYTES", 4 << 20)
    assert _reductions.bind_stacked(ts, ts[0], ReduceOp.SUM, rest=ts[1:]) is None
    assert _reductions.bind_stacked(ts, ts[0], ReduceOp.SUM) is not None


# ----- prepared calls: the chain bound once, and the faster strategy timed where it depends on the machine --
@pytest.mark.parametrize("op", [o for o in ReduceOp if o is not ReduceOp.AVG])
@pytest.mark.parametrize("where", ["in_place", "view", "fresh"])
def test_a_bound_chain_is_the_chain(op, where):
    ts = [torch.arange(1.0, 7.0) * (i + 1) for i in range(4)]
    want = _reduce.chain([t.clone() for t in ts], op, None)
    out = {"in_place": ts[2], "view": ts[2][:], "fresh": torch.zeros(6)}[where]
    run = _reduce.bind_chain(ts, op, out)
    for _ in range(2):  # reruns on the same tensors (in place: the input it reduces into changes, as chain's would)
        for i, t in enumerate(ts):
            t.copy_(torch.arange(1.0, 7.0) * (i + 1))
        run()
        assert torch.equal(out, want)


def test_a_chain_is_not_bound_for_avg_or_an_output_inside_an_input():
    ts = [torch.ones(6) for _ in range(3)]
    assert _reduce.bind_chain(ts, ReduceOp.AVG, torch.zeros(6)) is None
    assert _reduce.bind_chain(ts, ReduceOp.SUM, ts[1][2:]) is None  # partly an input: the general route copies


def test_faster_takes_the_smallest_median_in_alternating_rounds():
    calls: list[str] = []
    seconds = {"a": [5.0, 1.0, 1.0, 1.0, 9.0], "b": [2.0, 2.0, 2.0, 2.0, 2.0]}  # a's median 1.0: an outlier each way

    def timer(run, k):
        name = run()
        calls.append(name)
        return seconds[name].pop(0)

    runs = {"a": lambda: "a", "b": lambda: "b"}
    assert _reduce.faster(runs, timer, rounds=5, calls=3, warmup=0) == "a"
    assert calls == ["a", "b", "b", "a", "a", "b", "b", "a", "a", "b"]  # each round's order alternates
    tie = {"b": lambda: 1.0, "a": lambda: 1.0}
    assert _reduce.faster(tie, lambda run, k: run(), rounds=3) == "b"  # a tie keeps the first listed


def test_only_prepared_cuda_reductions_between_the_sure_sizes_are_timed(monkeypatch):
    assert _reduce.TIMED_MIN_BYTES == 2 << 20 and _reduce.TIMED_MAX_BYTES == 32 << 20
    meta = lambda nbytes: torch.empty(nbytes // 4, device="meta")  # noqa: E731
    assert not _reduce.times_routes(torch.empty(1 << 20))  # host tensors follow the rule
    monkeypatch.setattr(torch.Tensor, "is_cuda", property(lambda self: True))
    assert [_reduce.times_routes(meta(n)) for n in (2 << 20, (2 << 20) + 4, 8 << 20, (32 << 20) - 4, 32 << 20)] == [
        False, True, True, True, False]
    monkeypatch.setattr(_reduce, "TIME_ROUTES", False)
    assert not _reduce.times_routes(meta(8 << 20))
