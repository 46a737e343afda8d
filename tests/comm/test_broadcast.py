"""gpucomm.comm._broadcast: ``broadcast`` and ``broadcast_coalesced`` semantics and their own checks.

The error table for every comm function (tests/comm/test_errors.py) holds the broadcast argument
errors shared with torch.cuda.comm; here are the module's own rules: identity of slots on the
source's device, ``out`` checks, overlap, casts, and the coalesced variant's device rule.
"""

import pytest
import torch

import gpucomm.comm as c
from gpucomm.comm import _copy
from gpucomm.comm._broadcast import broadcast_outputs, check_broadcast_out
from gpucomm.testing import requires_gpus

C0 = "cuda:0"


def test_slots_on_the_source_device_are_the_source_itself():
    t = torch.arange(3.0)
    slots = c.broadcast(t, ["cpu", "cpu", "cpu"])
    assert len(slots) == 3 and all(s is t for s in slots)


def test_out_receives_a_full_copy_cast_as_copy_casts_and_is_returned_as_a_list():
    t = torch.arange(3.0)
    outs = (torch.zeros(3), torch.zeros(3, dtype=torch.int64), t)
    got = c.broadcast(t, out=outs)
    assert isinstance(got, list) and got[0] is outs[0] and got[2] is t
    assert got[0].tolist() == [0.0, 1.0, 2.0] and got[1].tolist() == [0, 1, 2] and got[1].dtype == torch.int64


def test_an_out_overlapping_the_source_gets_the_source_as_it_was():
    x = torch.arange(6.0)
    (o,) = c.broadcast(x[:4], out=[x[2:]])
    assert o.tolist() == [0.0, 1.0, 2.0, 3.0] and x.tolist() == [0.0, 1.0, 0.0, 1.0, 2.0, 3.0]


def test_out_checks_name_the_slot_the_expected_shape_and_the_fix():
    t = torch.zeros(2, 3)
    with pytest.raises(ValueError) as info:
        check_broadcast_out(t, [torch.zeros(2, 3), torch.zeros(3, 2)])
    assert str(info.value) == ("out[1]: expected shape [2, 3] (the source tensor's shape), but got shape [3, 2]; "
                               "broadcast copies the whole tensor into every output")
    with pytest.raises(ValueError, match=r"^out\[0\]: expected layout torch.strided \(the source's\), but got "
                                         r"tensor\(shape=\[2, 3\].*layout=torch.sparse_coo\)$"):
        check_broadcast_out(t, [torch.zeros(2, 3).to_sparse()])


def test_a_failed_out_check_writes_nothing():
    t = torch.ones(3)
    good, bad = torch.zeros(3), torch.zeros(4)
    with pytest.raises(ValueError, match=r"out\[1\]"):
        c.broadcast(t, out=[good, bad])
    assert good.tolist() == [0.0, 0.0, 0.0]


def test_broadcast_outputs_reuse_the_source_on_its_own_device():
    t = torch.arange(3.0)
    outs = broadcast_outputs(t, ["cpu", "cpu"])
    assert outs[0] is t and outs[1] is t


def test_sparse_sources_broadcast_into_sparse_outs():
    s = torch.tensor([[0.0, 2.0], [3.0, 0.0]]).to_sparse()
    o = torch.zeros(2, 2).to_sparse()
    (got,) = c.broadcast(s, out=[o])
    assert torch.equal(got.to_dense(), s.to_dense())


def test_coalesced_returns_the_inputs_themselves_on_a_single_device():
    ts = [torch.arange(3.0), torch.ones(2, 2, dtype=torch.int32)]
    (row,) = c.broadcast_coalesced(ts, ["cpu"], buffer_size=8)
    assert len(row) == 2 and all(torch.equal(a, b) for a, b in zip(row, ts, strict=True))


def test_coalesced_buffer_size_must_be_positive_and_says_the_default():
    with pytest.raises(ValueError, match=r"^buffer_size: expected a positive number of bytes, but got -1; "
                                         r"the default is 10485760$"):
        c.broadcast_coalesced([torch.zeros(1)], ["cpu"], buffer_size=-1)


@requires_gpus(1)
def test_coalesced_inputs_must_be_on_the_first_listed_device():
    with pytest.raises(ValueError, match=r"^tensors\[0\]: expected a tensor on devices\[0\] = cuda:0, but got "
                                         r"tensor\(shape=\[1\].*device=cpu\); move every tensor"):
        c.broadcast_coalesced([torch.zeros(1)], [C0, "cpu"])


@requires_gpus(1)
def test_a_device_listed_twice_gets_a_second_copy_made_from_the_first(monkeypatch):
    pairs = []
    real = _copy.copy_all
    monkeypatch.setattr(_copy, "copy_all", lambda ps: (pairs.extend(ps), real(ps))[1])
    t = torch.arange(4.0)
    slots = c.broadcast(t, [C0, "cpu", C0])
    torch.cuda.synchronize()
    assert slots[1] is t and slots[0].data_ptr() != slots[2].data_ptr()
    assert all(s.tolist() == [0.0, 1.0, 2.0, 3.0] for s in slots)
    assert any(dst is slots[2] and src is slots[0] for dst, src in pairs)


@requires_gpus(1)
def test_new_host_outputs_of_a_gpu_source_are_pinned_when_large():
    big = torch.zeros(1 << 17, device=C0)  # 512 KiB
    outs = broadcast_outputs(big, [C0, "cpu"])
    assert outs[0] is big and outs[1].device.type == "cpu" and outs[1].is_pinned()


def test_bound_broadcast_skips_the_source_and_bound_scatter_its_own_chunks():
    from gpucomm.comm import _broadcast, _kernels, _scatter_gather

    ts = [torch.arange(6.0) * (p + 1) for p in range(3)]
    outs = [torch.empty(6) for _ in ts]
    run = _broadcast.bind_broadcast(ts[0], [ts[0], *outs])  # the source itself is skipped
    run()
    ts[0].add_(1)
    run()
    assert all(torch.equal(o, ts[0]) for o in outs)
    assert _broadcast.bind_broadcast(ts[0], [ts[0]]) is _kernels.noop
    src = torch.arange(6.0)
    assert _scatter_gather.bind_scatter(src, list(src.split(2))) is _kernels.noop
