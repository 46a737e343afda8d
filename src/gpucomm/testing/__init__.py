"""Test helpers shipped with gpucomm: the ``requires_gpus(n)`` marker and the multi-process spawn helper.

They live in the package (not in ``tests/``) so that users can test their own code the same way.
"""

from gpucomm.testing.markers import requires_gpus
from gpucomm.testing.spawn import check_ranks, spawn

__all__ = ["check_ranks", "requires_gpus", "spawn"]
