"""Compute of a training step on one GPU: measured compute profiles, the datasheet model, and the seam between.

* :mod:`~gpucomm.advisor.compute.parts`: what a compute source answers (``ComputeParts``, ``Lookup``);
* :mod:`~gpucomm.advisor.compute.datasheet`: the datasheet model ("compute not measured");
* :mod:`~gpucomm.advisor.compute.source`: which source prices a job (:func:`source_for`, :func:`check`);
* :mod:`~gpucomm.advisor.compute.profile`: a measured compute profile, its file and its lookups;
* :mod:`~gpucomm.advisor.compute.shapes`, ``interpolate``, ``derive``: what is measured, how it is read between
  and beyond the measured points, and GPUs derived from a measured one of the same die;
* ``modules``, ``measure``, ``cli``: ``gpucomm measure`` (these import torch).

Nothing in this package imports torch at import time.
"""

from __future__ import annotations

from gpucomm.advisor.compute.parts import ComputeParts, Lookup
from gpucomm.advisor.compute.profile import ProfileError
from gpucomm.advisor.compute.source import ComputeSource, check, source_for

__all__ = ["ComputeParts", "ComputeSource", "Lookup", "ProfileError", "check", "source_for"]
