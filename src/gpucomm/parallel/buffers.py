"""Buffers (BatchNorm's running statistics and the like): replica 0's are the model's, copied to the others.

**The rule** (DDP's ``broadcast_buffers=True``, with replica 0 in the role of rank 0): each replica's
forward updates its own buffers from its own shard; whenever a training-mode forward may have changed
them, replica 0's buffers (rank 0's replica 0, across processes) are copied into every other replica
before the next forward and after the optimizer step.  So after every step all replicas are
bit-identical, buffers included, and the running statistics are those of replica 0's shards — what
DDP's rank 0 holds, not a statistic over the whole batch (that would be SyncBatchNorm).  With
``broadcast_buffers=False`` every replica keeps its own buffers and replica 0's are saved.

The copies are prepared collectives (``Communicator.prepare("broadcast", ...)``), one per buffer, made
once: buffers never move.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import nn

from gpucomm.communicator import Communicator

__all__ = ["BufferSync", "module_tensors"]


def module_tensors(module: nn.Module) -> list[torch.Tensor]:
    """Every buffer of ``module`` once, in ``named_buffers`` order."""
    return [b for _, b in module.named_buffers()]


class BufferSync:
    """Replica 0's buffers into every replica (and rank 0's into every process), by prepared broadcasts.

    Args:
        replicas: the replicas, replica 0 first.
        local: across this process's replicas, or None.
        group: across processes (holding replica 0's device), or None.
    """

    def __init__(self, replicas: Sequence[nn.Module], local: Communicator | None, group: Communicator | None) -> None:
        per_replica = [module_tensors(m) for m in replicas]
        self._calls: list[Callable[[], Any]] = []
        for j in range(len(per_replica[0])):
            if group is not None:
                self._calls.append(group.prepare("broadcast", [per_replica[0][j]], 0))
            if local is not None:
                self._calls.append(local.prepare("broadcast", [b[j] for b in per_replica], 0))

    def __bool__(self) -> bool:
        return bool(self._calls)

    def __call__(self) -> None:
        for call in self._calls:
            call()
