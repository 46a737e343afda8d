"""gpucomm.comm._host: host transfers, small ones as torch runs them, larger ones staged in pinned pieces.

The CPU tests swap the pinned allocator for ``torch.empty`` (this build has no CUDA) so the piece
pipeline, the round-robin order and the once-per-piece staging of a broadcast source are checked
without a GPU; the real pinned path is checked under ``requires_gpus(1)``.
"""

from types import SimpleNamespace

import pytest
import torch

import gpucomm.comm as c
from gpucomm.comm import _host
from gpucomm.testing import requires_gpus

C0 = "cuda:0"


@pytest.fixture
def staging(monkeypatch):
    """Pinned allocations become plain ones, recorded by shape."""
    shapes = []

    def fake(shape, dtype, memory_format=torch.contiguous_format):
        shapes.append(tuple(shape))
        return torch.empty(tuple(shape), dtype=dtype, memory_format=memory_format)

    monkeypatch.setattr(_host, "pinned_empty", fake)
    return shapes


def test_small_host_to_device_copies_are_direct_and_unstaged(staging):
    src = torch.arange(8.0)
    dst = torch.zeros(8)
    _host.host_to_device([(dst, src, None)])
    assert torch.equal(dst, src) and staging == []


def test_large_pageable_sources_go_in_pieces_round_robin_staged_once_per_piece(monkeypatch, staging):
    monkeypatch.setattr(_host, "DIRECT_MAX_BYTES", 0)
    monkeypatch.setattr(_host, "PIECE_BYTES", 16)  # 4 float32 per piece
    order = []
    real = _host._h2d
    monkeypatch.setattr(_host, "_h2d", lambda d, s, st: (order.append(float(s[0])), real(d, s, st)))
    a, b = torch.arange(10.0), torch.arange(100.0, 110.0)
    da, da2, db = torch.zeros(10), torch.zeros(10), torch.zeros(10)
    _host.host_to_device([(da, a, None), (db, b, None), (da2, a, None)])
    assert torch.equal(da, a) and torch.equal(da2, a) and torch.equal(db, b)
    # a (two destinations) is staged once per piece, and pieces alternate between the sources
    assert staging == [(4,), (4,), (4,), (4,), (2,), (2,)]
    assert order == [0.0, 0.0, 100.0, 4.0, 4.0, 104.0, 8.0, 8.0, 108.0]


def test_a_strided_source_is_staged_whole_once(monkeypatch, staging):
    monkeypatch.setattr(_host, "DIRECT_MAX_BYTES", 0)
    monkeypatch.setattr(_host, "PIECE_BYTES", 16)
    src = torch.arange(12.0).reshape(3, 4).t()
    dst = torch.zeros(4, 3)
    _host.host_to_device([(dst, src, None)])
    assert torch.equal(dst, src) and staging == [(4, 3)]


def test_device_to_host_stages_then_finish_synchronises_and_completes(monkeypatch, staging):
    monkeypatch.setattr(_host, "DIRECT_MAX_BYTES", 16)
    synced = []
    monkeypatch.setattr(torch.cuda, "current_stream",
                        lambda dev: SimpleNamespace(synchronize=lambda: synced.append(dev)))
    small_src, big_src = torch.arange(4.0), torch.arange(8.0)
    small, big = torch.zeros(4), torch.zeros(8)
    pending = _host.start_device_to_host([(small, small_src), (big, big_src)])
    assert torch.equal(small, small_src)  # small: copied at once
    assert torch.equal(big, torch.zeros(8)) and staging == [(8,)]  # large: only staged so far
    pending.finish()
    assert torch.equal(big, big_src) and synced == [big_src.device]


@requires_gpus(1)
@pytest.mark.parametrize("pinned", [False, True])
def test_scatter_and_broadcast_from_host_through_pinned_pieces(monkeypatch, pinned):
    monkeypatch.setattr(_host, "PIECE_BYTES", 4096)  # many pieces, so the pipeline really runs
    monkeypatch.setattr(_host, "DIRECT_MAX_BYTES", 1024)  # ... and the small-copy shortcut does not
    x = torch.arange(3 * 10_000, dtype=torch.float32).reshape(3, 10_000)
    if pinned:
        x = x.pin_memory()
    parts = c.scatter(x, [C0, C0, C0])
    copies = c.broadcast(x, [C0, C0])
    torch.cuda.synchronize()
    for p, want in zip(parts, x.chunk(3), strict=True):
        assert p.device == torch.device(C0) and torch.equal(p.cpu(), want)
    assert copies[0].data_ptr() != copies[1].data_ptr()  # a device listed twice gets two copies
    assert all(torch.equal(y.cpu(), x) for y in copies)


@requires_gpus(1)
def test_pinned_helpers_give_pinned_contiguous_copies():
    src = torch.arange(12.0).reshape(3, 4).t()
    copy = _host.pinned_copy(src)
    assert copy.is_pinned() and copy.is_contiguous() and torch.equal(copy, src)
    assert _host.pinned_empty((2, 3), torch.float16).is_pinned()


@requires_gpus(1)
def test_device_to_host_into_pageable_and_pinned_destinations():
    src = torch.arange(1 << 17, dtype=torch.float32, device=C0)  # 512 KiB: above DIRECT_MAX_BYTES
    pageable, pinned = torch.zeros(1 << 17), torch.zeros(1 << 17).pin_memory()
    _host.start_device_to_host([(pageable, src), (pinned, src)]).finish()
    assert torch.equal(pageable, src.cpu()) and torch.equal(pinned, src.cpu())
