"""What else took the host's time while something ran: the hypervisor's *steal* of this machine's CPUs, and
Python's cyclic garbage collector in this process.

A virtual machine's CPUs are threads of a host that other tenants share (the lent GPU machines are KVM guests,
``lscpu``: "Hypervisor vendor: KVM").  When the host runs another tenant on the physical core a virtual CPU is
mapped to, the guest's kernel counts the lost time as steal (``/proc/stat``'s eighth column; psutil's
``cpu_times().steal``).  An eager training step that the host paces (the Python side launching kernels slower
than the GPU runs them) slows with it, and a device-bound one does not.  Steal is the part of a host's
slowing the guest can see; a core slowed by its sibling thread's load or by a lower turbo clock shows none.
On the lent H200 machines it was none of it: on one, with 0.0% steal through every probe and case, the
host-paced cases' own ten steps spread 1.25-2.05x (benchmarks/results/gpu-logs-r25_h200x1_2026-12-04/README.txt) and a
fixed pure-Python workload's pace 2.62x over windows of 0.3 s
(benchmarks/results/host-speed_h200x1_2026-12-04.txt).  Reported so that a reading taken under steal is
known as such.

:func:`snapshot` reads every CPU's counters, :func:`steal_since` turns two readings into shares of the time
between them.  Nothing here samples in the background: two reads of ``/proc/stat``, one before and one after.

The collector runs inside the loop it interrupts: an eager step allocates Python objects for every operator
(per-op checkpointing's policy and saved-tensor hooks most of all), and a full collection walks every object the
process holds, so a step that triggers one takes longer by the walk.  :class:`GcTimer` counts the collections
and their seconds through ``gc.callbacks`` (called at each collection's start and stop, nothing between).  On
the H200 no full collection ran in any single-GPU case's timed steps (0-23 ms of collections a case,
benchmarks/results/gpu-logs-r26_h200x1_2026-12-04/README.txt).
"""

from __future__ import annotations

import gc
import time
from dataclasses import dataclass, field

__all__ = ["GcTimer", "Snapshot", "Steal", "snapshot", "steal_since"]

_NOT_TIME = ("guest", "guest_nice")  # Linux counts guest time inside user time as well: left out of the total


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Every CPU's (steal seconds, total seconds) since boot, as :func:`snapshot` read them."""

    cpus: tuple[tuple[float, float], ...]


@dataclass(frozen=True, slots=True)
class Steal:
    """The hypervisor's steal between two snapshots, as shares of the CPU time that passed."""

    share: float
    """Over all CPUs together: stolen seconds over the seconds every CPU spent, in every state."""
    most: float
    """On the CPU that lost the largest share (a single-threaded host loop runs on one CPU at a time)."""

    def __str__(self) -> str:
        return f"steal {self.share:.1%} of all CPUs' time, {self.most:.1%} on the most-stolen one"


def snapshot() -> Snapshot | None:
    """Every CPU's steal and total time now; ``None`` where the platform does not count steal (psutil reports it
    on Linux only) or psutil cannot read the counters."""
    try:
        import psutil

        per = psutil.cpu_times(percpu=True)
    except Exception:  # context only: its absence must not stop what it annotates
        return None
    if not per or not hasattr(per[0], "steal"):
        return None
    return Snapshot(tuple((float(t.steal), float(sum(v for k, v in t._asdict().items() if k not in _NOT_TIME)))
                          for t in per))


def steal_since(before: Snapshot | None, after: Snapshot | None = None) -> Steal | None:
    """The steal between ``before`` and ``after`` (default: now); ``None`` where either is missing, the CPU
    count changed between them, or no time passed on the counters (they tick in hundredths of a second)."""
    after = snapshot() if after is None else after
    if before is None or after is None or len(before.cpus) != len(after.cpus):
        return None
    pairs = [(s1 - s0, t1 - t0) for (s0, t0), (s1, t1) in zip(before.cpus, after.cpus, strict=True)]
    total = sum(t for _, t in pairs)
    if total <= 0:
        return None
    return Steal(share=max(0.0, sum(s for s, _ in pairs) / total),
                 most=max((max(0.0, s / t) for s, t in pairs if t > 0), default=0.0))


@dataclass(slots=True)
class GcTimer:
    """Python's garbage collections inside ``with GcTimer() as t:``: ``t.seconds`` spent in them and
    ``t.collections[g]`` collections of generation ``g`` (a generation-2 one walks every tracked object)."""

    seconds: float = 0.0
    collections: list[int] = field(default_factory=lambda: [0, 0, 0])
    _t0: float | None = None

    def _callback(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._t0 = time.perf_counter()
        elif self._t0 is not None:
            self.seconds += time.perf_counter() - self._t0
            self.collections[min(2, int(info.get("generation", 2)))] += 1
            self._t0 = None

    def __enter__(self) -> GcTimer:
        gc.callbacks.append(self._callback)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self._callback)

    def __str__(self) -> str:
        return f"gc {self.seconds * 1e3:.1f} ms in {sum(self.collections)} collections ({self.collections[2]} full)"
