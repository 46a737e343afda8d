"""The order in which an interleaved benchmark runs its sides in each round: a balanced Latin square.

Timing blocks of calls back to back leaves each block something of the one before it (a collector's debt,
a warm or cold cache, the device's queue).  When every round runs the sides in one rotation of the same
cycle, a side always follows the same other side, and that carry-over becomes a bias of a few per cent:
on the H200 (dist-call-overhead-r2_h200-nccl-ws1_2026-12-04.txt) the prepared side, for most ops the very
``functools.partial`` the raw side is, read 0.945-1.036 of it, always following the plain side.  A
Williams design (a Latin square in which each side follows every other side equally often; for an odd
number of sides, the square and its mirror) balances that first-order carry-over as well as the positions,
so each side is treated alike.  A run of whole cycles (a multiple of :func:`cycle`) is balanced exactly.
"""

from __future__ import annotations

__all__ = ["cycle", "order"]


def _square(k: int) -> list[list[int]]:
    first, lo, hi = [0], 1, k - 1
    while len(first) < k:
        first.append(lo)
        lo += 1
        if len(first) < k:
            first.append(hi)
            hi -= 1
    rows = [[(x + i) % k for x in first] for i in range(k)]
    return rows if k % 2 == 0 else rows + [row[::-1] for row in rows]


def cycle(k: int) -> int:
    """Rounds in one balanced cycle of ``k`` sides (``k``, or ``2k`` when ``k`` is odd)."""
    return len(_square(k))


def order(k: int, r: int) -> list[int]:
    """The sides' order (indices 0..k-1) in round ``r``."""
    rows = _square(k)
    return rows[r % len(rows)]
