"""The scatter row: expected results against values written out by hand (n = 1..8), buffers, calls on CPU."""

from __future__ import annotations

import pytest
from collectives_harness import ListData, allocate, check_local_calls, x

from gpucomm import collectives

ROW = collectives.get("scatter")
C = 3  # elements in the row's count


def test_by_hand_for_three_participants():
    # inputs: participant 0 holds 1, 2, 3, …; participant 1 holds 101, 102, …; participant 2 holds 201, …
    assert ROW.expected(2, 3, 2, 1, ListData(3)) == [105, 106]  # chunk 2 of participant 1's input


@pytest.mark.parametrize("n", range(1, 9))
def test_expected_for_every_participant(n):
    for root in (0, n - 1):
        for q in range(n):
            want = [x(root, q * C + i) for i in range(C)]
            assert ROW.expected(q, n, C, root, ListData(n)) == want, (n, root, q)


@pytest.mark.parametrize("n", range(1, 9))
def test_buffers(n):
    inputs, outputs = allocate(ROW, n, C, n - 1, "out-of-place")
    assert [i is not None for i in inputs] == [p == n - 1 for p in range(n)]
    assert inputs[n - 1].numel() == n * C and all(o.numel() == C for o in outputs)
    assert (ROW.ring_steps(n), ROW.wire_bytes(8 * n, n)) == ((n - 1, 8 * (n - 1)) if n > 1 else (0, 0))


@pytest.mark.parametrize("n", [1, 2, 3, 4, 8])
def test_calls_on_cpu_hold_the_expected_result(n):
    assert check_local_calls(ROW, n, C) == []
