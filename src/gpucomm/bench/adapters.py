"""The runtime side of each backend: hold the devices, make the row's call, synchronise.

An adapter is built from its :class:`~gpucomm.bench.backends.Backend` (which says everything else
about it) and holds the *library object* the row's call runs on: the ``torch.cuda.comm`` module, a
``LocalCommunicator``, the ``torch.distributed`` module or the ``gpucomm.dist`` module.  For a
case and a buffer set, :meth:`Adapter.invocation` asks the collective's row for the call
(``row.calls.<library>(lib, args)``) and :meth:`Adapter.bind` turns it into the zero-argument
callable the timed loop runs, plain or prepared (``lib.prepare(name, *args, **kwargs)``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.distributed as td

from gpucomm import collectives
from gpucomm.bench.backends import BACKENDS, GRAPH, GROUP, PLAIN, PREPARED, Backend
from gpucomm.bench.buffers import BufferSet, Case
from gpucomm.collectives.spec import Args, Invocation

__all__ = ["ADAPTERS", "Adapter", "GpucommComm", "GpucommDist", "TorchCudaComm", "TorchDistributed", "build"]


class Adapter:
    """What the runner needs from a backend at run time; subclasses set ``spec`` and the library."""

    spec: Backend

    def __init__(self, lib: Any, devices: Sequence[torch.device], participants: Sequence[int], n: int,
                 world_size: int = 1, rank: int = 0) -> None:
        self.lib = lib
        self.devices = list(devices)
        self.participants = list(participants)
        self.n, self.world_size, self.rank = n, world_size, rank
        prepares = callable(getattr(lib, "prepare", None))
        cuda = self.devices[0].type == "cuda"
        self.forms = tuple(f for f in self.spec.forms
                           if f == PLAIN or (prepares and (f == PREPARED or (f == GRAPH and cuda))))
        """The forms this library offers here: "prepared" where it has ``prepare``, "graph" also on CUDA."""

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def process_group(self) -> bool:
        return self.spec.scope == GROUP

    @property
    def device_type(self) -> str:
        return self.devices[0].type

    def invocation(self, case: Case, bufs: BufferSet) -> Invocation:
        """The row's call for ``case`` on ``bufs`` through this library."""
        call = collectives.get(case.op).calls.get(self.spec.library)
        if call is None:
            raise ValueError(f"{self.name} has no {case.op}")
        args = Args(inputs=bufs.inputs, outputs=bufs.outputs, n=case.n, root=case.root or 0, op=case.reduce_op,
                    rank=self.rank, devices=self.devices)
        return call(self.lib, args)

    def bind(self, inv: Invocation, form: str = PLAIN) -> Callable[[], Any]:
        """A zero-argument callable that performs ``inv``: the plain call, or the library's prepared one.

        The timed loop calls this, so the harness adds one Python call per op and nothing else
        (``benchmarks/harness_overhead.py`` measures it).
        """
        if form == PLAIN:
            return inv.bind()
        if form not in self.forms:
            raise ValueError(f"{self.name}: form {form!r} is not offered here; expected one of {self.forms}")
        return inv.prepared(self.lib, graph=form == GRAPH)

    def outputs(self, case: Case, bufs: BufferSet, inv: Invocation, returned: Any) -> list:
        """The tensors to check after a call: the buffers' outputs, or the result a call allocated."""
        if not inv.returns_output:
            return bufs.outputs
        root = case.root or 0
        return [returned if p == root else None for p in self.participants]

    def graph_capturable(self) -> bool:
        """True when every held participant is on one CUDA device (a CUDA graph captures one stream)."""
        return self.device_type == "cuda" and len({d.index for d in self.devices}) == 1

    def synchronize(self) -> None:
        for index in sorted({d.index for d in self.devices if d.type == "cuda"}):
            torch.cuda.synchronize(index)

    def barrier(self) -> None:
        """A barrier across processes (nothing to do for one-process backends)."""


class TorchCudaComm(Adapter):
    """``torch.cuda.comm``, called the way a user calls it (``out=`` where torch offers it)."""

    spec = BACKENDS["torch.cuda.comm"]

    def __init__(self, devices: Sequence[torch.device]) -> None:
        from torch.cuda import comm

        super().__init__(comm, devices, range(len(devices)), len(devices))


class GpucommComm(Adapter):
    """``gpucomm.comm`` through :class:`gpucomm.communicator.LocalCommunicator` (one process, all devices)."""

    spec = BACKENDS["gpucomm.comm"]

    def __init__(self, devices: Sequence[torch.device]) -> None:
        from gpucomm.communicator import LocalCommunicator

        super().__init__(LocalCommunicator(list(devices)), devices, range(len(devices)), len(devices))

    def synchronize(self) -> None:
        self.lib.synchronize()


class TorchDistributed(Adapter):
    """Raw ``torch.distributed`` on the default group (one participant per process)."""

    spec = BACKENDS["torch.distributed"]

    def __init__(self, device: torch.device) -> None:
        rank, world = td.get_rank(), td.get_world_size()
        super().__init__(td, [device], [rank], world, world, rank)

    def synchronize(self) -> None:
        if self.device_type == "cuda":
            torch.cuda.synchronize(self.devices[0])

    def barrier(self) -> None:
        if self.device_type == "cuda":
            td.barrier(device_ids=[self.devices[0].index])
        else:
            td.barrier()


class GpucommDist(Adapter):
    """``gpucomm.dist``'s functions on the default group (one participant per process).

    The module is the library: its calls are the row's ``gpucomm_dist`` calls, and its ``prepare``
    (:func:`gpucomm.dist.prepare`) gives the prepared form.
    """

    spec = BACKENDS["gpucomm.dist"]

    def __init__(self, device: torch.device) -> None:
        import gpucomm.dist as gd

        rank, world = td.get_rank(), td.get_world_size()
        super().__init__(gd, [device], [rank], world, world, rank)

    def synchronize(self) -> None:
        if self.device_type == "cuda":
            torch.cuda.synchronize(self.devices[0])

    def barrier(self) -> None:
        self.lib.barrier()


ADAPTERS: dict[str, type[Adapter]] = {cls.spec.name: cls for cls in (TorchCudaComm, GpucommComm, TorchDistributed,
                                                                      GpucommDist)}
"""Each backend's adapter class, by the backend's name (every :data:`~gpucomm.bench.backends.BACKENDS` entry)."""


def build(name: str, *args: Any) -> Adapter:
    """The runtime adapter of backend ``name``: ``(devices)`` for a "process" backend, ``(device)`` inside a
    rank for a "group" one."""
    return ADAPTERS[name](*args)
