"""gpucomm.comm._nccl: the one gate for the NCCL path and the ops it maps."""

import pytest
import torch

import gpucomm.comm as c
from gpucomm.collectives import ReduceOp
from gpucomm.comm import _nccl
from gpucomm.testing import requires_gpus

C0, C1 = "cuda:0", "cuda:1"


def test_every_reduce_op_maps_to_its_nccl_h_value():
    assert set(_nccl._NCCL_OP) == set(ReduceOp)
    assert _nccl._NCCL_OP == {ReduceOp.SUM: 0, ReduceOp.PROD: 1, ReduceOp.MAX: 2, ReduceOp.MIN: 3,
                              ReduceOp.AVG: 4}


def test_bool_moves_but_is_never_reduced():
    assert torch.bool in _nccl._MOVE_DTYPES and torch.bool not in _nccl._REDUCE_DTYPES
    assert _nccl._MOVE_DTYPES - _nccl._REDUCE_DTYPES == {torch.bool}


def test_unavailable_nccl_is_never_usable(monkeypatch):
    monkeypatch.setattr(_nccl, "available", lambda: False)
    assert not _nccl.usable([torch.zeros(2), torch.zeros(2)])


@pytest.mark.parametrize("tensors, kwargs", [
    ([torch.zeros(2)], {}),  # one participant: nothing to communicate
    ([torch.zeros(2), torch.zeros(2)], {}),  # both on the CPU (the same "device")
    ([torch.zeros(2, dtype=torch.bool)] * 2, {"op": ReduceOp.SUM}),
])
def test_usable_refuses_without_touching_cuda(monkeypatch, tensors, kwargs):
    monkeypatch.setattr(_nccl, "available", lambda: True)  # the gate's own rules, not the probe
    assert _nccl.usable(tensors, **kwargs) is False


def test_available_is_false_on_a_machine_without_gpus():
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    assert _nccl.available() is False


@requires_gpus(1)
def test_a_repeated_device_list_is_not_usable():
    assert not _nccl.usable([torch.zeros(4, device=C0), torch.zeros(4, device=C0)])


@requires_gpus(2)
def test_usable_on_distinct_gpus_only_when_dense_contiguous_and_one_dtype():
    a, b = torch.zeros(4, 4, device=C0), torch.zeros(4, 4, device=C1)
    assert _nccl.usable([a, b]) and _nccl.usable([a, b], op=ReduceOp.SUM)
    assert not _nccl.usable([a, b.t()])
    assert not _nccl.usable([a, b.double()])
    assert not _nccl.usable([a.bool(), b.bool()], op=ReduceOp.MAX)
    assert _nccl.usable([a.bool(), b.bool()])  # moving bytes is fine
    out = torch.zeros(4, 4, device=C0)
    assert _nccl.usable([a, b, out], distinct=[a, b])  # the output shares a's device


@requires_gpus(2)
@pytest.mark.parametrize("fn", ["all_reduce", "reduce_scatter", "all_gather", "broadcast", "reduce"])
def test_nccl_path_is_taken_on_distinct_devices(monkeypatch, fn):
    calls = []
    real = getattr(_nccl, fn)
    monkeypatch.setattr(_nccl, fn, lambda *a, **k: (calls.append(fn), real(*a, **k))[1])
    ts = [torch.arange(8.0, device=d) + i for i, d in enumerate([C0, C1])]
    want_sum = (torch.arange(8.0) * 2 + 1)
    if fn == "all_reduce":
        res = c.all_reduce(ts)
        assert all(torch.equal(r.cpu(), want_sum) for r in res)
    elif fn == "reduce_scatter":
        res = c.reduce_scatter(ts)
        assert [r.device.index for r in res] == [0, 1]
        assert torch.equal(torch.cat([r.cpu() for r in res]), want_sum)
    elif fn == "all_gather":
        res = c.all_gather(ts)
        assert all(torch.equal(r.cpu(), torch.cat([t.cpu() for t in ts])) for r in res)
    elif fn == "broadcast":
        res = c.broadcast(ts[0], [C0, C1])
        assert res[0] is ts[0] and torch.equal(res[1].cpu(), ts[0].cpu())
    else:
        res = c.reduce(ts, None, out=ts[1])  # in place, on the second device
        assert res is ts[1] and torch.equal(ts[1].cpu(), want_sum)
    assert calls == [fn]


@requires_gpus(2)
def test_non_contiguous_inputs_take_the_copy_path(monkeypatch):
    monkeypatch.setattr(_nccl, "all_reduce", lambda *a, **k: pytest.fail("NCCL used on strided input"))
    ts = [torch.arange(12.0, device=d).reshape(3, 4).t() for d in (C0, C1)]
    res = c.all_reduce(ts)
    assert all(torch.equal(r.cpu(), (torch.arange(12.0).reshape(3, 4).t() * 2)) for r in res)
