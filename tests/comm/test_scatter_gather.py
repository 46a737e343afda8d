"""gpucomm.comm._scatter_gather: the host-to-GPU routing decision, made before anything is split."""

from __future__ import annotations

import pytest
import torch

from gpucomm.comm import _host
from gpucomm.comm._scatter_gather import _direct_from_host


@pytest.mark.parametrize("shape,dim,n,sizes", [
    ((10,), 0, 4, None), ((10, 3), 0, 3, None), ((3, 10), 1, 4, None), ((7, 5, 2), 1, 2, [1, 4]),
    ((0, 4), 0, 3, None), ((1,), 0, 4, None), ((9, 4), 0, 3, [9, 0, 0]),
])
def test_direct_from_host_bounds_the_biggest_chunk_exactly(monkeypatch, shape, dim, n, sizes):
    t = torch.zeros(shape)
    chunks = t.chunk(n, dim) if sizes is None else t.split(sizes, dim)
    biggest = max(c.nbytes for c in chunks)
    monkeypatch.setattr(_host, "DIRECT_MAX_BYTES", biggest)  # at the bound: small enough
    assert _direct_from_host(t, dim, sizes, n)
    if biggest:
        monkeypatch.setattr(_host, "DIRECT_MAX_BYTES", biggest - 1)  # one byte under: not small (pageable)
        assert not _direct_from_host(t, dim, sizes, n)
