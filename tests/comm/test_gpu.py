"""CUDA paths: copy path, side streams, events, pinned staging, NCCL.  Skipped cleanly without GPUs.

``requires_gpus(1)`` tests use repeated ``cuda:0`` device lists (the copy path on one GPU, host
staging); ``requires_gpus(2)`` tests exercise cross-device side streams and NCCL.  Inputs are
produced by kernels still running when the call is made (a large matmul first), so a missing
stream dependency or host synchronisation shows up as wrong values.
"""

from __future__ import annotations

import pytest
import torch

import gpucomm.comm as c
from gpucomm.comm import _copy
from gpucomm.testing.markers import requires_gpus

C0, C1 = "cuda:0", "cuda:1"


def _busy(device: str) -> None:
    """Queue ~tens of ms of work on device's current stream, so later work is visibly asynchronous."""
    a = torch.randn(4096, 4096, device=device)
    for _ in range(4):
        a = a @ a
        a /= a.norm()


def _late(values: torch.Tensor, device: str) -> torch.Tensor:
    """``values`` on ``device``, written by a kernel queued behind busy work."""
    early = values.to(device)
    _busy(device)
    return early.clone()  # queued behind the busy work: not finished when the caller continues


# ----- one GPU, repeated cuda:0 ----------------------------------------------------------------------
@requires_gpus(1)
def test_gather_to_cpu_is_pinned_and_complete_on_return():
    parts = [_late(torch.arange(1 << 20, dtype=torch.float32) + i, C0) for i in range(4)]
    result = c.gather(parts, 0, "cpu")
    assert result.is_pinned()
    want = torch.cat([torch.arange(1 << 20, dtype=torch.float32) + i for i in range(4)])
    assert torch.equal(result, want)  # read without torch.cuda.synchronize(): must be complete


@requires_gpus(1)
def test_gather_to_cpu_along_inner_dim_and_into_pageable_out():
    parts = [_late(torch.arange(12.0).reshape(3, 4) + 10 * i, C0) for i in range(3)]
    want = torch.cat([torch.arange(12.0).reshape(3, 4) + 10 * i for i in range(3)], 1)
    assert torch.equal(c.gather(parts, 1, "cpu"), want)
    out = torch.zeros(3, 12)
    assert c.gather(parts, 1, out=out) is out
    assert torch.equal(out, want)


@requires_gpus(1)
def test_scatter_on_caller_streams():
    streams = [torch.cuda.Stream(C0), torch.cuda.Stream(C0)]
    x = torch.arange(8.0)
    parts = c.scatter(x, [C0, C0], streams=streams)
    for s in streams:
        s.synchronize()
    assert [p.tolist() for p in parts] == [[0, 1, 2, 3], [4, 5, 6, 7]]


@requires_gpus(1)
def test_same_device_results_keep_torch_identity_rules():
    x = torch.arange(6.0, device=C0).reshape(2, 3)
    slots = c.broadcast(x, [C0, C0])
    assert slots[0] is x and slots[1] is x
    rows = c.scatter(x, [C0, C0, C0])
    assert len(rows) == 2 and all(r.data_ptr() != 0 for r in rows)
    assert rows[0].data_ptr() == x.data_ptr()  # a chunk already on its device is a view


@requires_gpus(1)
def test_reduce_add_on_one_device_copies_nothing(monkeypatch):
    seen = []
    real = _copy.copy_all
    monkeypatch.setattr(_copy, "copy_all", lambda pairs: (seen.extend(pairs), real(pairs)))
    ts = [torch.full((1000,), float(i), device=C0) for i in range(8)]
    r = c.reduce_add(ts, C0)
    assert seen == [] and r.tolist() == [28.0] * 1000


@requires_gpus(1)
def test_all_reduce_in_place_on_repeated_device():
    ts = [_late(torch.full((1 << 16,), float(i)), C0) for i in range(4)]
    c.all_reduce(ts, "avg", out=ts)
    torch.cuda.synchronize()
    assert all(torch.all(t == 1.5) for t in ts)


@requires_gpus(1)
def test_small_host_transfers_take_torch_path_and_are_complete():
    x = torch.arange(12.0)  # pageable, far below DIRECT_MAX_BYTES
    streams = [torch.cuda.Stream(C0), None, torch.cuda.Stream(C0)]
    parts = c.scatter(x, [C0, C0, C0], streams=streams)
    copies = c.broadcast(x, [C0, C0])
    x.fill_(-1)  # the driver staged the pageable source before returning: overwriting it is safe
    torch.cuda.synchronize()
    assert [p.tolist() for p in parts] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]
    assert all(y.tolist() == list(map(float, range(12))) for y in copies)
    late = [_late(torch.arange(4.0) + 10 * i, C0) for i in range(3)]
    got = c.gather(late, 0, "cpu")  # small: pageable, filled by blocking copies, complete on return
    assert not got.is_pinned() and got.tolist() == [float(v + 10 * i) for i in range(3) for v in range(4)]
    out = torch.zeros(3, 4).pin_memory()
    c.gather([t.reshape(1, 4) for t in late], 0, out=out)  # small: a blocking copy, pinned or not
    assert out.reshape(-1).tolist() == got.tolist()


@requires_gpus(1)
def test_one_device_batched_copies_order_with_current_stream():
    n = 4
    lists = [[_late(torch.full((1000,), 10.0 * i + j), C0) for j in range(n)] for i in range(n)]
    grid = [[torch.empty(1000, device=C0) for _ in range(n)] for _ in range(n)]
    got = c.all_to_all(lists, out=grid)
    assert all(got[j][i] is grid[j][i] for j in range(n) for i in range(n))
    back = c.all_to_all(grid)
    c.all_to_all(lists, out=lists)  # in place
    ts = [_late(torch.full((1 << 12,), float(i)), C0) for i in range(n)]
    outs = [torch.empty(1 << 12, device=C0) for _ in range(n)]
    c.all_reduce(ts, out=outs)
    torch.cuda.synchronize()
    for j in range(n):
        for i in range(n):
            assert torch.all(grid[j][i] == 10.0 * i + j) and torch.all(lists[j][i] == 10.0 * i + j)
            assert torch.all(back[i][j] == 10.0 * i + j)
    assert all(torch.all(o == 6.0) for o in outs)
    bc = c.broadcast_coalesced([torch.arange(3.0, device=C0), torch.ones(2, 2, device=C0)], [C0, C0, C0])
    assert all(torch.equal(bc[k][0].cpu(), torch.arange(3.0)) for k in range(3))


# ----- two GPUs --------------------------------------------------------------------------------------
@requires_gpus(2)
def test_big_cross_device_gather_uses_side_streams_and_orders_with_current_streams():
    n = (_copy.OVERLAP_MIN_BYTES // 4) * 2
    srcs = [_late(torch.arange(n, dtype=torch.float32) + i, d) for i, d in enumerate([C0, C1])]
    out = c.gather(srcs, 0, C0)
    for s in srcs:
        s.fill_(-1)  # overwriting the sources on their current streams must not race the copies
    torch.cuda.synchronize()
    want = torch.cat([torch.arange(n, dtype=torch.float32) + i for i in range(2)])
    assert torch.equal(out.cpu(), want)
    assert (0, 1) in _copy._STREAMS and (1, 0) in _copy._STREAMS


@requires_gpus(2)
def test_big_cross_device_scatter_and_all_to_all():
    n = _copy.OVERLAP_MIN_BYTES  # float32: 4 MiB, chunks and pieces of at least 1 MiB
    x = _late(torch.arange(n, dtype=torch.float32), C0)
    parts = c.scatter(x, [C0, C1, C1])
    lists = [[_late(torch.full((n // 4,), 10.0 * i + j), d) for j in range(2)] for i, d in enumerate([C0, C1])]
    swapped = c.all_to_all(lists)
    torch.cuda.synchronize()
    for p, want in zip(parts, torch.arange(n, dtype=torch.float32).chunk(3), strict=True):
        assert torch.equal(p.cpu(), want)
    assert swapped[1][0].device == torch.device(C1) and torch.all(swapped[1][0] == 1.0)
    assert torch.all(swapped[0][1] == 10.0)


@requires_gpus(2)
def test_stream_on_the_wrong_device_is_rejected():
    with pytest.raises(ValueError, match=r"streams\[1\]: expected a stream on cuda:1"):
        c.scatter(torch.arange(4.0), [C0, C1], streams=[None, torch.cuda.Stream(C0)])


@requires_gpus(2)
def test_gather_to_cpu_from_two_devices_inner_dim():
    parts = [_late(torch.arange(6.0).reshape(2, 3) + 10 * i, d) for i, d in enumerate([C0, C1])]
    got = c.gather(parts, 1, "cpu")
    assert torch.equal(got, torch.cat([torch.arange(6.0).reshape(2, 3) + 10 * i for i in range(2)], 1))
