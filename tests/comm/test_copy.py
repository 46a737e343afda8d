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
