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

import functools
import os
from importlib import resources
from typing import Protocol

from gpucomm.advisor.compute import derive
from gpucomm.advisor.compute.datasheet import Datasheet
from gpucomm.advisor.compute.parts import ComputeParts, Lookup
from gpucomm.advisor.compute.profile import ComputeProfile, ProfileSource, check_hardware, load
from gpucomm.advisor.job import Job
from gpucomm.advisor.layout import Layout

__all__ = ["SHIPPED", "ComputeSource", "check", "measured_for", "shipped", "source_for"]

SHIPPED = {"h200-nvswitch": "h200.json"}
"""Measured profiles shipped with the package (``advisor/compute/data/``), by the ``--hardware`` they price;
:data:`gpucomm.advisor.compute.derive.TARGETS` are derived from them."""


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

    def margin_bytes(self, job: Job, layout: Layout) -> Lookup | None:
        """The caching allocator's reserved bytes beyond allocated at the step's peak; None: not measured."""
        ...

    def assumptions(self, job: Job) -> list[str]:
        """One line per figure the numbers rest on that was not measured here, with its source."""
        ...


_DATASHEET = Datasheet()


@functools.lru_cache(maxsize=8)
def shipped(name: str) -> ComputeProfile | None:
    """The shipped profile file ``name`` (``data/h200.json``), or None when the package has none."""
    ref = resources.files("gpucomm.advisor.compute").joinpath("data", name)
    if not ref.is_file():
        return None
    with resources.as_file(ref) as path:
        profile = load(path, arg="shipped profile")
    profile.source = f"shipped {name}"
    return profile


@functools.lru_cache(maxsize=16)
def _from_file(path: str, mtime: float, hardware: str, kind: str) -> ProfileSource:
    profile = load(path)
    check_hardware(profile, hardware, kind)
    return ProfileSource(profile)


def _base(job: Job) -> str:
    return job.profile.name.split("+")[0].split(" ")[0]


def source_for(job: Job) -> ComputeSource:
    """The compute source of ``job`` (module docstring): the file ``job.compute_profile`` names, else the profile
    shipped or derived for ``job.profile``, else the datasheet model; ``kernels="unfused"`` is always the
    datasheet's (Megatron-LM 2019's stack is not measured).  With ``job.host == "this"`` a measured profile's
    host time is scaled to this machine's host (:func:`_this_host`).

    Raises:
        ProfileError: the file cannot be read, or was measured on another GPU than the hardware; ``--host this``
            on a machine without the profile's GPU.
    """
    src = _source(job)
    if job.host == "this" and isinstance(src, ProfileSource):
        return _this_host(src)
    return src


@functools.lru_cache(maxsize=8)
def _this_host(src: ProfileSource) -> ProfileSource:
    """``src`` with its host time scaled to this machine's (:func:`gpucomm.advisor.compute.measure.host_ratios`:
    times the profile's host-bound points here, once per process; imports torch)."""
    from gpucomm.advisor.compute import measure

    ratios, line = measure.host_ratios(src)
    return src.with_host(ratios, line)


def _source(job: Job) -> ComputeSource:
    if job.kernels == "unfused":
        return _DATASHEET
    if job.compute_profile:
        path = os.fspath(job.compute_profile)
        try:
            mtime = os.stat(path).st_mtime
        except OSError:
            mtime = 0.0
        return _from_file(path, mtime, _base(job), job.profile.kind)
    if job.profile.kind != "gpu":
        return _DATASHEET
    return measured_for(_base(job)) or _DATASHEET


def measured_for(hardware: str) -> ProfileSource | None:
    """The measured compute source of the ``--hardware`` profile ``hardware``: the profile shipped for it, or
    one derived for it from a shipped profile (:mod:`gpucomm.advisor.compute.derive`); None for neither."""
    name = SHIPPED.get(hardware)
    if name is not None and shipped(name) is not None:
        return _shipped_source(name)
    if hardware in derive.TARGETS:
        for file in SHIPPED.values():
            derived = _derived(file, hardware) if shipped(file) is not None else None
            if derived is not None:
                return derived
    return None


@functools.lru_cache(maxsize=8)
def _shipped_source(name: str) -> ProfileSource:
    profile = shipped(name)
    return ProfileSource(profile, label=f"measured on {profile.gpu} ({profile.source})")


@functools.lru_cache(maxsize=8)
def _derived(name: str, hardware: str) -> ProfileSource | None:
    return derive.derive(shipped(name), hardware)


def check(job: Job) -> None:
    """Raise :class:`~gpucomm.advisor.compute.profile.ProfileError` now for anything the job's compute source
    would refuse later (an unreadable or foreign profile, another GPU, a software or dtype it did not measure),
    so that the CLI exits 2 before any work."""
    src = source_for(job)
    if isinstance(src, ProfileSource):
        src.check(job)
