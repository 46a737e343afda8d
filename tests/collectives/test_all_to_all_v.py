"""The all_to_all_v row: uneven splits, expected results against values written out by hand, calls on CPU."""

from __future__ import annotations

import pytest
from collectives_harness import ListData, allocate, check_local_calls, x

from gpucomm import collectives
from gpucomm.collectives.all_to_all_v import split_sizes

ROW = collectives.get("all_to_all_v")
C = 3


def _units(n: int) -> list[list[int]]:
    """The splits in units, written out independently: 2 to the next participant, 0 to the one after."""
    if n == 1:
        return [[1]]
    if n == 2:
        return [[0, 2], [2, 0]]
    return [[2 if j == (i + 1) % n else 0 if j == (i + 2) % n else 1 for j in range(n)] for i in range(n)]


def test_by_hand_for_three_participants():
    assert split_sizes(3, 1) == [[1, 2, 0], [0, 1, 2], [2, 0, 1]]
    data = ListData(3)
    assert ROW.expected(0, 3, 1, 0, data) == [1, 201, 202]
    assert ROW.expected(1, 3, 1, 0, data) == [2, 3, 101]
    assert ROW.expected(2, 3, 1, 0, data) == [102, 103, 203]


@pytest.mark.parametrize("n", range(1, 9))
def test_expected_for_every_participant(n):
    u = _units(n)
    assert split_sizes(n, C) == [[v * C for v in row] for row in u]
    for q in range(n):
        want = []
        for p in range(n):
            start = sum(u[p][:q]) * C
            want += [x(p, start + k) for k in range(u[p][q] * C)]
        assert ROW.expected(q, n, C, 0, ListData(n)) == want, (n, q)


@pytest.mark.parametrize("n", range(1, 9))
def test_buffers_hold_n_units_and_the_cost_is_all_to_alls(n):
    inputs, outputs = allocate(ROW, n, C, 0, "out-of-place")
    assert all(i.numel() == o.numel() == n * C for i, o in zip(inputs, outputs, strict=True))
    assert all(sum(row) == n * C for row in split_sizes(n, C))
    assert all(sum(col) == n * C for col in zip(*split_sizes(n, C), strict=True))
    assert ROW.ring_steps(n) == (n - 1 if n > 1 else 0)
    assert ROW.busbw_factor(n) == (n - 1) / n  # as all_to_all (nccl-tests has no alltoallv)
    assert ROW.calls.communicator is not None and ROW.method.params == ("outputs", "inputs", "split_sizes")


@pytest.mark.parametrize("n", [1, 2, 3, 4, 8])
def test_calls_on_cpu_hold_the_expected_result(n):
    assert check_local_calls(ROW, n, C) == []
