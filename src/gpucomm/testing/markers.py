"""``requires_gpus(n)``: run a test only where at least ``n`` CUDA devices are visible.

Usage::

    @requires_gpus(2)
    def test_nccl_path_on_two_devices(): ...

Below ``n`` devices the test is skipped with a reason that says how many were found, so a CPU-only
CI run reports it as skipped, never as passed.
"""

from __future__ import annotations

import pytest

from gpucomm.devices import cuda_device_count

__all__ = ["requires_gpus"]


def requires_gpus(n: int) -> pytest.MarkDecorator:
    """A pytest mark that skips unless ``n`` CUDA devices are visible (and tags the test ``requires_gpus``)."""
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"requires_gpus: expected n >= 1, but got {n!r}")
    found = cuda_device_count()
    skip = pytest.mark.skipif(found < n, reason=f"needs {n} CUDA device(s), found {found}")

    def mark(fn):
        return pytest.mark.requires_gpus(n)(skip(fn))

    return mark
