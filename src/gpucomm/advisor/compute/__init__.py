"""Compute of a training step on one GPU: measured compute profiles, the datasheet model, and the seam between.

* :mod:`~gpucomm.advisor.compute.parts`: what a compute source answers (``ComputeParts``, ``Lookup``);
* :mod:`~gpucomm.advisor.compute.datasheet`: the datasheet model ("compute not measured");
* :mod:`~gpucomm.advisor.compute.source`: which source prices a job (:func:`source_for`).

Nothing in this package imports torch at import time.
"""

from __future__ import annotations

from gpucomm.advisor.compute.parts import ComputeParts, Lookup
from gpucomm.advisor.compute.source import ComputeSource, source_for

__all__ = ["ComputeParts", "ComputeSource", "Lookup", "source_for"]
