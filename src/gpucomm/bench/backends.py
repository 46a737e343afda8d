"""The backends ``gpucomm bench`` compares, and every attribute of each: this is their one home.

=====================  ==================  ==========  =================================================
backend                baseline            scope       performs a collective through
=====================  ==================  ==========  =================================================
``torch.cuda.comm``    (is one)            process     ``torch.cuda.comm`` (CUDA only; ``out=`` forms)
``gpucomm.comm``       torch.cuda.comm     process     :class:`gpucomm.communicator.LocalCommunicator`
``torch.distributed``  (is one)            group       raw ``torch.distributed`` calls
``gpucomm.dist``       torch.distributed   group       ``gpucomm.dist``'s functions (torch.distributed's shapes)
=====================  ==================  ==========  =================================================

``scope`` says how participants are held: "process" = one process holds every device; "group" = one
participant per rank of a process group.  Which collectives a backend offers, and the call it makes,
come from each collective's row (``row.calls.<library>``, :mod:`gpucomm.collectives`), never from here.

A backend times every collective it offers in each of its ``forms``: "plain" (the call a user writes)
and, where the library has ``prepare``, "prepared" (checked once, rerun without checks) and, on CUDA
under eager timing, "graph" (prepared with ``graph=True``: one captured call, replayed).  A
"prepared" or "graph" row's speedup is against the baseline's *plain* call — the question "what does the wrapper
cost or save over the raw library" — and its note says so.

This module imports no torch (the CLI's ``--help``, the report and the advisor read it); the runtime
adapters that do are in :mod:`gpucomm.bench.adapters`, which names each backend's adapter class and builds
it (:func:`gpucomm.bench.adapters.build`).  This table never imports that module.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpucomm import collectives
from gpucomm.collectives import ReduceOp
from gpucomm.collectives.spec import OUT_OF_PLACE

__all__ = [
    "BACKENDS",
    "GROUP",
    "LOCAL_BACKENDS",
    "GRAPH",
    "PLAIN",
    "PREPARED",
    "PROCESS",
    "PROCESS_GROUP_BACKENDS",
    "Backend",
    "baseline_of",
    "placements_for",
]

PROCESS, GROUP = "process", "group"
PLAIN, PREPARED, GRAPH = "plain", "prepared", "graph"


@dataclass(frozen=True, slots=True, kw_only=True)
class Backend:
    """One compared backend: what it is called, what it is compared with, and how it runs."""

    name: str
    """The name in records, flags and reports."""
    baseline: str | None
    """The backend this one's speedups are against; None for a baseline itself."""
    order: int
    """Display order in tables and plots (smaller first; baselines precede what is compared with them)."""
    scope: str
    """"process" (one process holds every participant) or "group" (one participant per rank)."""
    library: str
    """The row call it makes: a :data:`gpucomm.collectives.spec.BACKEND_CALLS` name."""
    note: str
    """One line for reports: what is being called, and how."""
    forms: tuple[str, ...] = (PLAIN,)
    """Forms it is timed in: "plain"; "prepared" and "graph" where the library offers ``prepare``."""
    placements: tuple[str, ...] | None = None
    """Placements it measures; None = each row's own (torch.cuda.comm has only ``out=`` forms)."""
    device_type: str | None = None
    """The only device type it runs on, or None for any."""

    @property
    def is_baseline(self) -> bool:
        return self.baseline is None

    @property
    def compared_with(self) -> str:
        """The backend a ratio divides by: the baseline, or itself for a baseline."""
        return self.baseline or self.name

    def placements_for(self, op: collectives.CollectiveName) -> tuple[str, ...]:
        """The placements this backend measures for ``op``."""
        return self.placements if self.placements is not None else collectives.get(op).placements

    def unsupported(self, op: collectives.CollectiveName, dtype: Any, reduce_op: ReduceOp | None,
                    device_type: str) -> str | None:
        """Why this backend does not offer the point, in words; None when it does."""
        if self.device_type is not None and device_type != self.device_type:
            return f"{self.name} runs on {self.device_type.upper()} devices only"
        reason = collectives.get(op).calls.why_not(self.library, reduce_op)
        if reason:
            return reason
        if reduce_op is ReduceOp.AVG and not dtype.is_floating_point:
            return "avg is defined for floating dtypes only"
        return None


BACKENDS: dict[str, Backend] = {b.name: b for b in sorted((
    Backend(name="torch.cuda.comm", baseline=None, order=10, scope=PROCESS, library="torch_cuda_comm",
            note="torch.cuda.comm as users call it: out= where torch offers it",
            placements=(OUT_OF_PLACE,), device_type="cuda"),
    Backend(name="gpucomm.comm", baseline="torch.cuda.comm", order=20, scope=PROCESS, library="communicator",
            note="gpucomm.comm through LocalCommunicator", forms=(PLAIN, PREPARED, GRAPH)),
    Backend(name="torch.distributed", baseline=None, order=30, scope=GROUP, library="torch_distributed",
            note="raw torch.distributed calls, one participant per rank"),
    Backend(name="gpucomm.dist", baseline="torch.distributed", order=40, scope=GROUP, library="gpucomm_dist",
            note="gpucomm.dist's functions, one participant per rank; prepared through gpucomm.dist.prepare",
            forms=(PLAIN, PREPARED)),
), key=lambda b: b.order)}
"""Every backend by name, in display order."""

LOCAL_BACKENDS = tuple(b.name for b in BACKENDS.values() if b.scope == PROCESS)
PROCESS_GROUP_BACKENDS = tuple(b.name for b in BACKENDS.values() if b.scope == GROUP)


def baseline_of(name: str) -> str | None:
    """The backend ``name``'s ratios divide by (itself for a baseline); None for an unknown name."""
    b = BACKENDS.get(name)
    return b.compared_with if b is not None else None


def placements_for(op: collectives.CollectiveName) -> tuple[str, ...]:
    """Placements the Communicator and torch.distributed backends measure for ``op`` (the row's)."""
    return collectives.get(op).placements
