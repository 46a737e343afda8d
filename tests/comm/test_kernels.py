"""gpucomm.comm._kernels (the seam): ``bind`` reruns each public function's work on fixed buffers, unchecked."""

from __future__ import annotations

import gc
import weakref

import pytest
import torch

import gpucomm.comm as c
from gpucomm.comm import _kernels as k


def _ts(n=3):
    return [torch.arange(6.0).reshape(6, 1) * (p + 1) for p in range(n)]


def test_every_public_collective_has_a_prepared_form_registered_by_its_module():
    public = set(c.__all__) - {"prepare", "broadcast_coalesced", "reduce_add_coalesced"}
    assert set(k.forms()) == public


def test_bound_forms_match_the_public_functions_and_rerun_with_new_contents():
    ts = _ts()
    cases = [
        ("all_reduce", ts, [torch.empty(6, 1) for _ in ts], {"op": "max"}, lambda: c.all_reduce(ts, "max")),
        ("reduce", ts, torch.empty(6, 1), {"destination": "cpu"}, lambda: c.reduce(ts, "cpu")),
        ("reduce_scatter", ts, [torch.empty(2, 1) for _ in ts], {}, lambda: c.reduce_scatter(ts)),
        ("all_gather", ts, [torch.empty(18, 1) for _ in ts], {}, lambda: c.all_gather(ts)),
        ("scatter", ts[1], [torch.empty(2, 1) for _ in ts], {}, lambda: c.scatter(ts[1], ["cpu"] * 3)),
        ("gather", ts, torch.empty(18, 1), {}, lambda: c.gather(ts, destination="cpu")),
        ("broadcast", ts[2], [torch.empty(6, 1) for _ in ts], {}, lambda: c.broadcast(ts[2], ["cpu"] * 3)),
        ("send_recv", ts, [torch.empty(6, 1) for _ in ts], {}, lambda: c.send_recv(ts)),
    ]
    for name, inputs, outputs, options, public in cases:
        run, result, touched = k.bind(name, inputs, outputs, **options)
        for step in range(2):
            for i, t in enumerate(ts):
                t.copy_(torch.arange(6.0).reshape(6, 1) * (i + 1 + step))
            run()
            want = public()
            got = [result] if isinstance(result, torch.Tensor) else list(result)
            want = [want] if isinstance(want, torch.Tensor) else list(want)
            assert all(torch.equal(a, b) for a, b in zip(got, want, strict=True)), (name, step)
        assert touched


def test_bind_refuses_what_prepare_refuses():
    with pytest.raises(ValueError, match="op: expected one of"):
        k.bind("all_reducee", _ts())
    with pytest.raises(TypeError, match="takes the options"):
        k.bind("all_reduce", _ts(), None, dim=0)
    with pytest.raises(ValueError, match=r"tensors\[1\]: expected dtype"):
        k.bind("all_reduce", [torch.ones(2), torch.ones(2, dtype=torch.float64)])


def test_bind_copies_and_noop():
    dsts, srcs = [torch.empty(3) for _ in range(4)], [torch.full((3,), float(i)) for i in range(4)]
    run = k.bind_copies(dsts, srcs)
    run()
    assert all(torch.equal(d, s) for d, s in zip(dsts, srcs, strict=True))
    assert k.noop() is None


def test_plain_broadcast_and_scatter_hand_what_torchs_loops_check_to_them(torch_loops):
    src, outs = torch.arange(4.0), [torch.zeros(4) for _ in range(3)]
    assert c.broadcast(src, out=outs) == outs and torch_loops == ["broadcast"]
    assert all(torch.equal(o, src) for o in outs)
    pieces = [torch.zeros(2) for _ in range(3)]
    assert c.scatter(torch.arange(6.0), out=pieces) == tuple(pieces) and torch_loops == ["broadcast", "scatter"]
    assert torch.equal(torch.cat(pieces), torch.arange(6.0))
    assert c.scatter(torch.arange(6.0).reshape(2, 3), out=[torch.zeros(2, 2),
                     torch.zeros(2, 1)], dim=1)[1].flatten().tolist() == [2.0, 5.0]
    assert torch_loops[-1] == "scatter"


def test_what_torchs_loops_do_not_check_takes_the_checked_route(torch_loops):
    base = torch.arange(8.0)
    c.broadcast(base[:4], out=[base[2:6], torch.zeros(4)])  # an output inside the source's storage
    assert torch_loops == [] and torch.equal(base[2:6], torch.arange(4.0))
    with pytest.raises(ValueError, match=r"out\[1\]: expected a tensor that does not overlap out\[0\]"):
        c.scatter(torch.arange(4.0), out=list(torch.zeros(4).as_strided((2, 2), (1, 1))))  # outputs overlap
    with pytest.raises(ValueError, match=r"out\[1\]: expected shape \[4\]"):  # refused by the loop: ours names it
        c.broadcast(torch.ones(4), out=[torch.zeros(4), torch.zeros(5)])
    assert torch_loops == []
    grad = torch.zeros(4, requires_grad=True)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):  # copy_'s own refusal, either way
        c.broadcast(torch.ones(4), out=[grad])
    assert torch_loops == [] and torch.equal(grad.detach(), torch.zeros(4))
    assert not k.broadcast_out(torch.ones(2), [torch.ones(2).to_sparse()])  # no storage: the checked route
    assert not k.broadcast_out(torch.ones(2), [])  # torch's loop takes an empty list; ours refuses it by name
    assert not k.scatter_out(torch.tensor(1.0), [torch.zeros(())], 0)  # a 0-dim source: torch's loop misreads it
    assert not k.broadcast_out(torch.ones(1 << 17), [torch.zeros(1 << 17)])  # a 512 KiB host source: pinned route
    assert torch_loops == []


def test_the_storage_test_sees_shared_memory():
    base = torch.zeros(8)
    assert not k.unshared(base, [base[4:]]) and not k.unshared(base[:2], [torch.zeros(2), base[6:]])
    assert k.unshared(base, [torch.zeros(2), torch.zeros(2)])
    assert not k.unshared(torch.zeros(2), [3])


# ----- held routes: a LocalCommunicator's plain broadcast/scatter, remembered per storage ----------------
def _held(n=3):
    devices = (torch.device("cpu"),) * n
    return k.Held(devices, one_device=list(devices), distinct=False)


def _counting_remember(monkeypatch):
    checked = []
    real = k._remember

    def remember(*args):
        checked.append(args[1])
        return real(*args)

    monkeypatch.setattr(k, "_remember", remember)
    return checked


def test_held_routes_exist_only_where_torchs_loop_does(torch_loops):
    assert k.held_routes() == {"broadcast", "scatter"}
    assert k.held_route("all_reduce", _held()) is None and k.held_route("broadcast", _held(1)) is None
    assert k.held_route("broadcast", _held()) is not None
    torch_loops_saved, k.BROADCAST_OUT = k.BROADCAST_OUT, None
    try:
        assert k.held_route("broadcast", _held()) is None  # a CPU build: no loop, no route
    finally:
        k.BROADCAST_OUT = torch_loops_saved


def test_a_held_route_checks_a_call_once_and_then_only_its_storages(torch_loops, monkeypatch):
    checked = _counting_remember(monkeypatch)
    route = k.held_route("broadcast", _held())
    ts = [torch.full((4,), float(p)) for p in range(3)]
    assert route(ts, ts, 1) and checked == [1] and torch_loops == ["broadcast"]
    assert all(torch.equal(t, torch.ones(4)) for t in ts)
    ts[0].add_(5)  # an in-place op bumps the version: no fact the route remembers depends on it
    views = [t[:] for t in ts]  # other tensor objects on the same storages: the same verdict
    assert route(views, views, 2) and route(ts, ts, 0) and checked == [1]
    others = [torch.full((4,), 7.0) for _ in range(3)]  # alternating storage sets are both remembered
    assert route(others, others, 0) and route(ts, ts, 0) and route(others, others, 0) and checked == [1, 0]
    assert len(torch_loops) == 6


def test_a_held_route_asks_again_when_a_tensor_gets_another_storage(torch_loops, monkeypatch):
    checked = _counting_remember(monkeypatch)
    route = k.held_route("broadcast", _held())
    ts = [torch.zeros(4) for _ in range(3)]
    assert route(ts, ts, 0) and checked == [0]
    ts[2].data = ts[1]  # .data = keeps the tensor object and its version: now two share one storage
    assert not route(ts, ts, 0) and checked == [0, 0]  # asked again, refused
    ts[2].data = torch.zeros(5)  # a storage of its own, another shape: asked again, then torch's loop refuses
    assert not route(ts, ts, 0) and len(checked) == 3
    ts[2].set_(ts[1].untyped_storage())  # set_: shared again
    assert not route(ts, ts, 0) and len(checked) == 4
    ts[2].set_(torch.zeros(4).untyped_storage())
    assert route(ts, ts, 0) and len(checked) == 5
    torch.utils.swap_tensors(ts[1], torch.empty(4, device="meta"))  # the same object, now on another device
    assert ts[1].device.type == "meta"
    assert not route(ts, ts, 0) and len(checked) == 6
    assert torch_loops == ["broadcast"] * 2


def test_a_held_route_never_takes_a_new_storage_for_a_freed_one(torch_loops, monkeypatch):
    """Entries are filed under the first storage's id, which a new storage can reuse once the old one is freed:
    every id is made to collide here, and the weak references (dead once freed) tell the storages apart."""
    monkeypatch.setattr(k, "id", lambda obj: 42, raising=False)  # the routes' `id` is the module's global
    route = k.held_route("broadcast", _held())
    ts = [torch.zeros(4) for _ in range(3)]
    assert route(ts, ts, 0)
    gone = weakref.ref(ts[1].untyped_storage())
    ts[1] = torch.empty(4, device="meta")
    gc.collect()
    assert gone() is None  # the remembered entry keeps no storage alive
    assert not route(ts, ts, 0)  # same key, dead references: asked again, and refused
    assert torch_loops == ["broadcast"]


def test_a_held_scatter_reads_what_can_change_without_a_new_storage(torch_loops):
    route = k.held_route("scatter", _held())
    src, outs = torch.arange(6.0), [torch.zeros(2) for _ in range(3)]
    ins = [None, src, None]
    assert route(ins, outs, 1) and torch.equal(torch.cat(outs), src)
    assert not route(ins, outs, 0)  # the remembered call's root was 1: the root's input is asked again
    outs[1].resize_(1)  # resize_ keeps the storage object: the chunk counts are read every call
    assert not route(ins, outs, 1)
    outs[1].resize_(2)
    assert route(ins, outs, 1)
    outs[2].data = outs[2].data[:1]  # .data = a view of the same storage: the same storage object
    outs[0].data = torch.zeros(3)  # unequal chunks that still add up: torch's loop would take them
    assert not route(ins, outs, 1)
    outs = [torch.zeros(2), torch.zeros(2), torch.zeros(1)]  # the last output is never counted: torch's sum is
    assert not route([None, torch.arange(5.0), None], outs, 1)  # 5 elements, not 3 x 2
    assert not route([None, torch.arange(6.0), None], outs, 1)  # 3 x 2, but the loop's sum (5) refuses
    outs = [torch.zeros(2, 2), torch.zeros(2, 2), torch.zeros(2, 2)]
    assert not route([None, torch.zeros(3, 4), None], outs, 1)  # 12 elements, but other dims differ: the loop refuses
    empty = [torch.zeros(0, 2) for _ in range(3)]
    assert not route([None, torch.zeros(0, 2), None], empty, 1)  # empty chunks: their counts say nothing
    assert not route([None, torch.tensor(1.0), None], [torch.zeros(())] * 3, 1)  # a 0-dim source
    assert torch_loops == ["scatter"] * 2
