"""gpucomm.comm._copy: aliasing checks that make out= safe to alias inputs."""

from __future__ import annotations

import torch

from gpucomm.comm import _copy


def test_overlaps_and_protect():
    base = torch.arange(10.0)
    a, b = base[:5], base[5:]
    assert not _copy.overlaps(a, b)
    assert _copy.overlaps(base[2:7], a)
    assert not _copy.overlaps(torch.empty(0), base)
    pairs = _copy.protect([(a, a), (b, base[3:8])], [a, b])
    assert len(pairs) == 1  # the self-copy is dropped
    dst, src = pairs[0]
    assert dst is b and src.data_ptr() != base.data_ptr() + 3 * 4  # the overlapped source was cloned
    assert torch.equal(src, torch.arange(3.0, 8.0))


def test_copy_many_copies_and_keeps_autograd_and_conjugates():
    from gpucomm.comm._copy import copy_many

    srcs = [torch.arange(3.0) + i for i in range(4)]
    dsts = [torch.zeros(3) for _ in range(4)]
    copy_many(dsts, srcs)
    assert all(torch.equal(d, s) for d, s in zip(dsts, srcs, strict=True))
    leaf = torch.ones(3, requires_grad=True)
    outs = [torch.zeros(3), torch.zeros(3)]
    copy_many(outs, [leaf * 2, leaf * 3])  # no foreach formula: must take copy_, which records the graph
    (outs[0].sum() + outs[1].sum()).backward()
    assert leaf.grad.tolist() == [5.0, 5.0, 5.0]
    z = torch.tensor([1 + 2j, 3 - 1j])
    got = [torch.zeros(2, dtype=torch.complex64), torch.zeros(2, dtype=torch.complex64)]
    copy_many(got, [z.conj(), z])
    assert torch.equal(got[0], torch.tensor([1 - 2j, 3 + 1j])) and torch.equal(got[1], z)
