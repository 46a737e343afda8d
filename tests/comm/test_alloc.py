"""gpucomm.comm._alloc: output allocation (pinned host buffers when a GPU takes part and they are big)."""

import torch

from gpucomm.comm import _alloc, _host
from gpucomm.comm._alloc import empty_like_on, empty_on, replicate, suggest_memory_format
from gpucomm.testing import requires_gpus

CPU = torch.device("cpu")


def test_empty_on_makes_the_shape_dtype_and_format_asked_for():
    t = empty_on([2, 3, 4, 5], torch.float16, CPU, pinned=False, memory_format=torch.channels_last)
    assert t.shape == (2, 3, 4, 5) and t.dtype == torch.float16 and t.device == CPU
    assert t.is_contiguous(memory_format=torch.channels_last) and not t.is_contiguous()
    assert not t.is_pinned()


def test_small_or_unpinned_host_buffers_stay_pageable(monkeypatch):
    calls = []
    monkeypatch.setattr(_alloc, "pinned_empty", lambda *a: calls.append(a) or torch.empty(0))
    n = _host.DIRECT_MAX_BYTES // 4
    assert empty_on([n], torch.float32, CPU, pinned=True).shape == (n,)  # at the bound: pageable
    assert empty_on([n + 1], torch.float32, CPU, pinned=False).shape == (n + 1,)
    assert empty_like_on(torch.zeros(n), CPU, pinned=True).shape == (n,)
    assert calls == []


def test_big_host_buffers_with_a_gpu_in_the_call_are_pinned(monkeypatch):
    calls = []
    monkeypatch.setattr(_alloc, "pinned_empty", lambda *a: calls.append(a) or torch.empty(0))
    n = _host.DIRECT_MAX_BYTES // 4 + 1
    empty_on([n], torch.float32, CPU, pinned=True)
    empty_like_on(torch.zeros(n), CPU, pinned=True)
    assert [c[0] for c in calls] == [[n], torch.Size([n])]
    assert calls[0][1] == torch.float32


def test_empty_like_on_keeps_strides_of_a_dense_tensor():
    t = torch.zeros(3, 4).t()
    out = empty_like_on(t, CPU, pinned=False)
    assert out.shape == (4, 3) and out.stride() == t.stride() and out.dtype == t.dtype


def test_suggest_memory_format_follows_torch_cuda_comm_gather():
    cl = [torch.zeros(2, 3, 4, 5).to(memory_format=torch.channels_last) for _ in range(2)]
    cl3 = [torch.zeros(2, 3, 4, 5, 6).to(memory_format=torch.channels_last_3d)]
    assert suggest_memory_format(cl) == torch.channels_last
    assert suggest_memory_format(cl3) == torch.channels_last_3d
    assert suggest_memory_format([cl[0], torch.zeros(2, 3, 4, 5)]) == torch.contiguous_format  # one is not
    assert suggest_memory_format([torch.zeros(2, 1, 4, 5)]) == torch.contiguous_format  # both at once
    assert suggest_memory_format([torch.zeros(3)]) == torch.contiguous_format


def test_replicate_makes_k_distinct_equal_copies():
    t = torch.arange(6.0).reshape(2, 3)
    copies = replicate(t, 3)
    assert len(copies) == 3 and all(torch.equal(c, t) for c in copies)
    copies[0].fill_(-1)
    assert torch.equal(copies[1], t) and torch.equal(t, torch.arange(6.0).reshape(2, 3))
    assert replicate(t, 0) == []


@requires_gpus(1)
def test_big_host_buffers_are_really_pinned_on_a_gpu_machine():
    n = _host.DIRECT_MAX_BYTES // 4 + 1
    assert empty_on([n], torch.float32, CPU, pinned=True).is_pinned()
    assert empty_like_on(torch.zeros(n), CPU, pinned=True).is_pinned()
    assert not empty_on([n], torch.float32, CPU, pinned=False).is_pinned()
