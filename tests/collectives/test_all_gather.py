"""The all_gather row: expected results against values written out by hand (n = 1..8), buffers, calls on CPU."""

from __future__ import annotations

import pytest
from collectives_harness import ListData, allocate, check_local_calls, x

from gpucomm import collectives

ROW = collectives.get("all_gather")
C = 3  # elements in the row's count


def test_by_hand_for_three_participants():
    # inputs: participant 0 holds 1, 2, 3, …; participant 1 holds 101, 102, …; participant 2 holds 201, …
    assert ROW.expected(1, 3, 2, 0, ListData(3)) == [1, 2, 101, 102, 201, 202]


@pytest.mark.parametrize("n", range(1, 9))
def test_expected_for_every_participant(n):
    for root in (0, n - 1):
        for q in range(n):
            want = [x(p, i) for p in range(n) for i in range(C)]
            assert ROW.expected(q, n, C, root, ListData(n)) == want, (n, root, q)


@pytest.mark.parametrize("n", range(1, 9))
def test_buffers(n):
    inputs, outputs = allocate(ROW, n, C, 0, "in-place")
    for p, (i, o) in enumerate(zip(inputs, outputs, strict=True)):
        assert o.numel() == n * C and i.data_ptr() == o.data_ptr() + p * C * 8  # own chunk of the output
    inputs, outputs = allocate(ROW, n, C, 0, "out-of-place")
    assert all(i.numel() == C and i.untyped_storage().data_ptr() != o.untyped_storage().data_ptr()
               for i, o in zip(inputs, outputs, strict=True))
    assert ROW.round_size(8 * n * C + 5, n, 8) == (C, 8 * n * C)  # whole chunks
    assert (ROW.ring_steps(n), ROW.wire_bytes(8 * n, n)) == ((n - 1, 8 * (n - 1)) if n > 1 else (0, 0))


@pytest.mark.parametrize("n", [1, 2, 3, 4, 8])
def test_calls_on_cpu_hold_the_expected_result(n):
    assert check_local_calls(ROW, n, C) == []
