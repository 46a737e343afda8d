"""The broadcast row: expected results against values written out by hand (n = 1..8), buffers, calls on CPU."""

from __future__ import annotations

import pytest
from collectives_harness import ListData, allocate, check_local_calls, x

from gpucomm import collectives

ROW = collectives.get("broadcast")
C = 3  # elements in the row's count


def test_by_hand_for_three_participants():
    # inputs: participant 0 holds 1, 2, 3, …; participant 1 holds 101, 102, …; participant 2 holds 201, …
    assert ROW.expected(2, 3, 2, 1, ListData(3)) == [101, 102]
    assert ROW.expected(0, 3, 2, 0, ListData(3)) == [1, 2]


@pytest.mark.parametrize("n", range(1, 9))
def test_expected_for_every_participant(n):
    for root in (0, n - 1):
        for q in range(n):
            want = [x(root, i) for i in range(C)]
            assert ROW.expected(q, n, C, root, ListData(n)) == want, (n, root, q)


@pytest.mark.parametrize("n", range(1, 9))
def test_buffers(n):
    inputs, outputs = allocate(ROW, n, C, 0, "in-place")
    assert all(i is o and o.numel() == C for i, o in zip(inputs, outputs, strict=True))
    inputs, outputs = allocate(ROW, n, C, n - 1, "out-of-place")
    assert [i is not None for i in inputs] == [p == n - 1 for p in range(n)]
    assert ROW.input_nbytes(8 * C, n, is_root=False) == 0 and ROW.output_nbytes(8 * C, n) == 8 * C
    assert (ROW.ring_steps(n), ROW.wire_bytes(8 * C, n)) == ((n - 1, 8 * C) if n > 1 else (0, 0))


@pytest.mark.parametrize("n", [1, 2, 3, 4, 8])
def test_calls_on_cpu_hold_the_expected_result(n):
    assert check_local_calls(ROW, n, C) == []
