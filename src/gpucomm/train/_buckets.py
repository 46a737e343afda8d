"""Gradient buckets as DDP forms them: reverse parameter order, a small first bucket, then a size cap.

Gradients are produced roughly in reverse ``parameters()`` order during backward, so buckets are
filled from the last parameter backwards.  The first bucket (holding the last layers' gradients,
which are ready first) is capped small (DDP: ``dist._DEFAULT_FIRST_BUCKET_BYTES`` = 1 MiB) so that
its all-reduce starts early; the rest are capped at ``bucket_cap_mb`` (DDP default 25 MiB).  A
bucket is closed as soon as it reaches its cap (so one large parameter can exceed it, alone), and
when the dtype changes (one flat buffer holds one dtype).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

__all__ = ["MiB", "plan_buckets"]

MiB = 1 << 20


def plan_buckets(params: Sequence[torch.Tensor], cap_bytes: int, first_cap_bytes: int) -> list[list[int]]:
    """Group parameter indices into buckets, last parameter first.

    Args:
        params: the parameters, in ``model.parameters()`` order.
        cap_bytes: size at which a bucket (other than the first) is closed.
        first_cap_bytes: size at which the first bucket is closed.

    Returns:
        One list of indices into ``params`` per bucket, in launch order (bucket 0 = last parameters);
        each index appears exactly once; within a bucket, indices descend.
    """
    if cap_bytes <= 0 or first_cap_bytes <= 0:
        raise ValueError(f"bucket caps must be > 0 bytes, but got cap_bytes={cap_bytes}, "
                         f"first_cap_bytes={first_cap_bytes}")
    buckets: list[list[int]] = []
    current: list[int] = []
    size = 0
    for i in reversed(range(len(params))):
        p = params[i]
        if current and p.dtype != params[current[-1]].dtype:
            buckets.append(current)
            current, size = [], 0
        current.append(i)
        size += p.numel() * p.element_size()
        if size >= (first_cap_bytes if not buckets else cap_bytes):
            buckets.append(current)
            current, size = [], 0
    if current:
        buckets.append(current)
    return buckets
