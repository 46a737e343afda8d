"""gpucomm.comm._kernels (the seam): ``bind`` reruns each public function's work on fixed buffers, unchecked."""

from __future__ import annotations

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
