"""gpucomm.comm._exchange and friends: the one-device fast paths."""

from __future__ import annotations

import torch

import gpucomm.comm as c


def test_one_device_fast_paths_return_distinct_correct_tensors():
    n = 3
    lists = [[torch.full((2,), 10.0 * i + j) for j in range(n)] for i in range(n)]
    got = c.all_to_all(lists)
    assert all(torch.equal(got[j][i], lists[i][j]) for i in range(n) for j in range(n))
    got[0][1].add_(100)
    assert lists[1][0].tolist() == [10.0, 10.0]  # results are copies, not the inputs
    ring = c.send_recv([torch.full((2,), float(i)) for i in range(n)])
    assert [r[0].item() for r in ring] == [2.0, 0.0, 1.0]
    pieces = c.reduce_scatter([torch.arange(6.0)] * n)
    assert [p.tolist() for p in pieces] == [[0.0, 3.0], [6.0, 9.0], [12.0, 15.0]]
