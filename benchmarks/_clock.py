"""The GPU clock the training benchmarks share: a step's GPU time, measured behind a sleep kernel.

A step's CUDA events measure its execution only if the device never waits for the host between them; a
``torch.cuda._sleep`` kernel queued first, longer than the host's enqueue time, guarantees that.  Used by
``train_graphs.py`` and ``parallel_vs_dataparallel.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

__all__ = ["SleepClock"]


class SleepClock:
    """Synchronise (CUDA only) and time a step's GPU execution behind a calibrated sleep kernel."""

    def __init__(self, cuda: bool) -> None:
        self.cuda = cuda
        self.cycles_per_ms = self._calibrate() if cuda else 0.0

    @staticmethod
    def _calibrate() -> float:
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        torch.cuda._sleep(20_000_000)
        end.record()
        torch.cuda.synchronize()
        return 20_000_000 / start.elapsed_time(end)

    def sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize()

    def behind_sleep(self, fn: Callable[[], Any], host_ms: float) -> tuple[float, Any]:
        """``fn()``'s GPU time (ms) and result: a sleep of twice ``host_ms`` (+5 ms) queued first, then events."""
        self.sync()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(int(self.cycles_per_ms * (2 * host_ms + 5)))  # outlasts the enqueue
        start.record()
        result = fn()
        end.record()
        self.sync()
        return start.elapsed_time(end), result
