"""The exact check: patterns are exact in low precision, expected results are right, wrong elements counted."""

from __future__ import annotations

import pytest
import torch

from gpucomm.bench.check import count_wrong, expected, pattern, value_modulus
from gpucomm.collectives import CollectiveName as C
from gpucomm.collectives import ReduceOp


def test_small_all_reduce_by_hand():
    n, count = 2, 6
    x0 = pattern(0, count, n, ReduceOp.SUM, dtype=torch.int64)
    x1 = pattern(1, count, n, ReduceOp.SUM, dtype=torch.int64)
    assert not torch.equal(x0, x1)  # participants differ, so a missed exchange shows up
    got = expected(C.ALL_REDUCE, 0, n=n, count=count, dtype=torch.float32, reduce_op=ReduceOp.SUM, root=0)
    assert got.tolist() == [float(a + b) for a, b in zip(x0.tolist(), x1.tolist(), strict=True)]


def test_chunked_and_rooted_rules():
    n, c = 3, 4
    pats = [pattern(p, n * c, n, None, dtype=torch.float64) for p in range(n)]
    a2a = expected(C.ALL_TO_ALL, 1, n=n, count=c, dtype=torch.float32, reduce_op=None, root=0)
    assert torch.equal(a2a, torch.cat([pats[i][c:2 * c] for i in range(n)]))
    scat = expected(C.SCATTER, 2, n=n, count=c, dtype=torch.float32, reduce_op=None, root=1)
    assert torch.equal(scat, pats[1][2 * c:3 * c])
    assert expected(C.GATHER, 1, n=n, count=c, dtype=torch.float32, reduce_op=None, root=0) is None
    assert expected(C.REDUCE, 0, n=n, count=c, dtype=torch.float32, reduce_op=ReduceOp.MAX, root=0) is not None
    sr = expected(C.SEND_RECV, 0, n=n, count=c, dtype=torch.float32, reduce_op=None, root=0)
    assert torch.equal(sr, pattern(2, c, n, None, dtype=torch.float64))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("op", [ReduceOp.SUM, ReduceOp.PROD, ReduceOp.MAX])
@pytest.mark.parametrize("n", [2, 7, 16])
def test_sums_in_low_precision_are_exact_in_any_order(dtype, op, n):
    count = 4096
    xs = [pattern(p, count, n, op, dtype=dtype) for p in reversed(range(n))]  # reversed: another order
    acc = xs[0].clone()
    for x in xs[1:]:
        acc = acc + x if op is ReduceOp.SUM else acc * x if op is ReduceOp.PROD else torch.maximum(acc, x)
    want = expected(C.ALL_REDUCE, 0, n=n, count=count, dtype=dtype, reduce_op=op, root=0)
    assert count_wrong(acc, want, op) == 0


def test_value_modulus_keeps_sums_under_256():
    for n in (1, 2, 8, 64, 128):
        assert (value_modulus(n) - 1) * n <= 256


def test_count_wrong_counts_each_bad_element():
    want = torch.arange(10, dtype=torch.float64)
    got = want.to(torch.float32).clone()
    assert count_wrong(got, want, ReduceOp.SUM) == 0
    got[3] += 1
    got[7] = float("nan")
    assert count_wrong(got, want, ReduceOp.SUM) == 2
    assert count_wrong(None, want, None) == 10
    assert count_wrong(got[:5], want, None) == 10


def test_avg_allows_two_ulp_only():
    want = torch.tensor([1 / 3, 5.0], dtype=torch.float64)
    got = want.to(torch.float32)
    eps = torch.finfo(torch.float32).eps
    assert count_wrong(got * (1 + eps), want, ReduceOp.AVG) == 0
    assert count_wrong(got * (1 + 8 * eps), want, ReduceOp.AVG) == 2
