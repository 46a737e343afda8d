"""One thin adapter per backend: the four ways ``gpucomm bench`` performs a collective.

Every adapter takes the same :class:`~gpucomm.bench.buffers.BufferSet` and performs one op on it, so
the runner's loop is identical for all of them; only the call differs:

============================  ==============================================  ========================
adapter                       calls                                           participants held here
============================  ==============================================  ========================
:class:`TorchCudaComm`        ``torch.cuda.comm`` (broadcast, reduce_add,      all (one process)
                              scatter, gather; CUDA only; out-of-place)
:class:`GpucommComm`          ``gpucomm.communicator.LocalCommunicator``       all (one process)
:class:`TorchDistributed`     raw ``torch.distributed`` calls                  one (one per process)
:class:`GpucommDist`          ``gpucomm.communicator.ProcessGroupCommunicator`` one (one per process)
============================  ==============================================  ========================

:meth:`Backend.call` returns the outputs to check when they are not the buffers' own (torch's
``reduce_add`` allocates its result).  :meth:`Backend.unsupported` says, in words, why an (op, dtype,
reduction op, placement) is not offered, or returns None.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

import torch

from gpucomm.bench.buffers import IN_PLACE, OUT_OF_PLACE, BufferSet, Case
from gpucomm.collectives import CollectiveName, ReduceOp

__all__ = [
    "BACKENDS",
    "LOCAL_BACKENDS",
    "LOCAL_FACTORIES",
    "PROCESS_GROUP_FACTORIES",
    "PROCESS_GROUP_BACKENDS",
    "Backend",
    "GpucommComm",
    "GpucommDist",
    "TorchCudaComm",
    "TorchDistributed",
    "placements_for",
]

LOCAL_BACKENDS = ("torch.cuda.comm", "gpucomm.comm")
PROCESS_GROUP_BACKENDS = ("torch.distributed", "gpucomm.dist")
BACKENDS = LOCAL_BACKENDS + PROCESS_GROUP_BACKENDS

_N = CollectiveName
_BOTH = (OUT_OF_PLACE, IN_PLACE)
_PLACEMENTS: dict[CollectiveName, tuple[str, ...]] = {
    _N.BROADCAST: (IN_PLACE,), _N.REDUCE: (IN_PLACE,), _N.ALL_REDUCE: (IN_PLACE,),
    _N.ALL_GATHER: _BOTH, _N.REDUCE_SCATTER: _BOTH,
    _N.SCATTER: (OUT_OF_PLACE,), _N.GATHER: (OUT_OF_PLACE,), _N.ALL_TO_ALL: (OUT_OF_PLACE,),
    _N.SEND_RECV: (OUT_OF_PLACE,),
}


def placements_for(op: CollectiveName) -> tuple[str, ...]:
    """Placements the Communicator and torch.distributed backends measure for ``op`` (docs §4)."""
    return _PLACEMENTS[op]


class Backend:
    """What the runner needs from a backend; subclasses override :meth:`call` and the capability hooks."""

    name: str = ""
    process_group: bool = False

    def __init__(self, devices: Sequence[torch.device], participants: Sequence[int], n: int,
                 world_size: int = 1) -> None:
        self.devices = list(devices)
        self.participants = list(participants)
        self.n = n
        self.world_size = world_size

    @property
    def device_type(self) -> str:
        return self.devices[0].type

    @classmethod
    def placements(cls, op: CollectiveName) -> tuple[str, ...]:
        """The placements this backend measures for ``op``."""
        return placements_for(op)

    @classmethod
    def unsupported(cls, op: CollectiveName, dtype: torch.dtype, reduce_op: ReduceOp | None,
                    device_type: str) -> str | None:
        """Why this backend does not offer the point, in words; None when it does."""
        if reduce_op is ReduceOp.AVG and not dtype.is_floating_point:
            return "avg is defined for floating dtypes only"
        return None

    def graph_capturable(self) -> bool:
        """True when every held participant is on one CUDA device (a CUDA graph captures one stream)."""
        return self.device_type == "cuda" and len({d.index for d in self.devices}) == 1

    def call(self, case: Case, bufs: BufferSet) -> list[torch.Tensor | None] | None:
        """Perform the op once; returns the outputs to check when they are not ``bufs.outputs``."""
        raise NotImplementedError

    def bind(self, case: Case, bufs: BufferSet) -> Callable[[], object]:
        """A zero-argument callable performing the op on ``bufs``, arguments resolved once.

        The timed loop calls this, so the harness adds one Python call per op and nothing else
        (``benchmarks/harness_overhead.py`` measures it).
        """
        return functools.partial(self.call, case, bufs)

    def synchronize(self) -> None:
        for index in sorted({d.index for d in self.devices if d.type == "cuda"}):
            torch.cuda.synchronize(index)

    def barrier(self) -> None:
        """A barrier across processes (nothing to do for one-process backends)."""


# ----- torch.cuda.comm ------------------------------------------------------------------------------
class TorchCudaComm(Backend):
    """``torch.cuda.comm``, called the way a user calls it (``out=`` where torch offers it)."""

    name = "torch.cuda.comm"
    _OPS = {_N.BROADCAST, _N.REDUCE, _N.SCATTER, _N.GATHER}

    def __init__(self, devices: Sequence[torch.device]) -> None:
        super().__init__(devices, range(len(devices)), len(devices))

    @classmethod
    def placements(cls, op: CollectiveName) -> tuple[str, ...]:
        return (OUT_OF_PLACE,)

    @classmethod
    def unsupported(cls, op: CollectiveName, dtype: torch.dtype, reduce_op: ReduceOp | None,
                    device_type: str) -> str | None:
        if device_type != "cuda":
            return "torch.cuda.comm runs on CUDA devices only"
        if op not in cls._OPS:
            return f"torch.cuda.comm has no {op}"
        if op is _N.REDUCE and reduce_op is not ReduceOp.SUM:
            return "torch.cuda.comm.reduce_add only sums"
        return super().unsupported(op, dtype, reduce_op, device_type)

    def bind(self, case: Case, bufs: BufferSet) -> Callable[[], object]:
        from torch.cuda import comm

        root = case.root or 0
        if case.op is _N.BROADCAST:
            return functools.partial(comm.broadcast, bufs.inputs[root], out=bufs.outputs)
        if case.op is _N.REDUCE:
            return functools.partial(comm.reduce_add, bufs.inputs, destination=self.devices[root].index)
        if case.op is _N.SCATTER:
            return functools.partial(comm.scatter, bufs.inputs[root], out=bufs.outputs)
        if case.op is _N.GATHER:
            return functools.partial(comm.gather, bufs.inputs, dim=0, out=bufs.outputs[root])
        raise ValueError(f"torch.cuda.comm has no {case.op}")

    def call(self, case: Case, bufs: BufferSet) -> list[torch.Tensor | None] | None:
        result = self.bind(case, bufs)()
        if case.op is _N.REDUCE:  # reduce_add returns a new tensor on the root's device
            return [result if k == (case.root or 0) else None for k in range(len(self.devices))]
        return None


# ----- the Communicator backends ----------------------------------------------------------------------
def communicator_bind(comm, case: Case, bufs: BufferSet) -> Callable[[], object]:
    """``case.op`` on ``bufs`` through a :class:`gpucomm.communicator.Communicator` (the ABC's contract)."""
    op, outs, ins = case.op, bufs.outputs, bufs.inputs
    root, rop = case.root or 0, case.reduce_op
    p = functools.partial
    if op is _N.BROADCAST:
        return p(comm.broadcast, outs, root=root)
    if op is _N.REDUCE:
        return p(comm.reduce, outs, root=root, op=rop)
    if op is _N.ALL_REDUCE:
        return p(comm.all_reduce, outs, op=rop)
    if op is _N.ALL_GATHER:
        return p(comm.all_gather, outs, ins)
    if op is _N.REDUCE_SCATTER:
        return p(comm.reduce_scatter, outs, ins, op=rop)
    if op is _N.SCATTER:
        return p(comm.scatter, outs, ins, root=root)
    if op is _N.GATHER:
        return p(comm.gather, outs, ins, root=root)
    if op is _N.ALL_TO_ALL:
        return p(comm.all_to_all, outs, ins)
    if op is _N.SEND_RECV:
        return p(comm.send_recv, outs, ins)
    raise ValueError(f"no Communicator method for {op}")


def communicator_call(comm, case: Case, bufs: BufferSet) -> None:
    """Perform ``case.op`` once through a Communicator."""
    communicator_bind(comm, case, bufs)()


class GpucommComm(Backend):
    """``gpucomm.comm`` through :class:`gpucomm.communicator.LocalCommunicator` (one process, all devices)."""

    name = "gpucomm.comm"

    def __init__(self, devices: Sequence[torch.device]) -> None:
        from gpucomm.communicator import LocalCommunicator

        super().__init__(devices, range(len(devices)), len(devices))
        self.comm = LocalCommunicator(list(devices))

    def call(self, case: Case, bufs: BufferSet) -> None:
        communicator_call(self.comm, case, bufs)

    def bind(self, case: Case, bufs: BufferSet) -> Callable[[], object]:
        return communicator_bind(self.comm, case, bufs)

    def synchronize(self) -> None:
        self.comm.synchronize()


class GpucommDist(Backend):
    """``gpucomm.dist`` through :class:`gpucomm.communicator.ProcessGroupCommunicator` (one device here)."""

    name = "gpucomm.dist"
    process_group = True

    def __init__(self, device: torch.device | None = None) -> None:
        from gpucomm.communicator import ProcessGroupCommunicator

        self.comm = ProcessGroupCommunicator(group=None)
        super().__init__(self.comm.devices, self.comm.participants, self.comm.n, self.comm.world_size)

    def call(self, case: Case, bufs: BufferSet) -> None:
        communicator_call(self.comm, case, bufs)

    def bind(self, case: Case, bufs: BufferSet) -> Callable[[], object]:
        return communicator_bind(self.comm, case, bufs)

    def synchronize(self) -> None:
        self.comm.synchronize()

    def barrier(self) -> None:
        self.comm.barrier()


# ----- raw torch.distributed ----------------------------------------------------------------------------
class TorchDistributed(Backend):
    """Raw ``torch.distributed`` calls on the default group, one participant (this rank's device)."""

    name = "torch.distributed"
    process_group = True

    def __init__(self, device: torch.device) -> None:
        import torch.distributed as dist

        rank, world = dist.get_rank(), dist.get_world_size()
        super().__init__([device], [rank], world, world)
        self.rank = rank

    def bind(self, case: Case, bufs: BufferSet) -> Callable[[], object]:
        import torch.distributed as dist

        op, n, rank = case.op, case.n, self.rank
        inp, out = bufs.inputs[0], bufs.outputs[0]
        root = case.root or 0
        rop = _dist_op(case.reduce_op)
        p = functools.partial
        if op is _N.BROADCAST:
            return p(dist.broadcast, out, src=root)
        if op is _N.REDUCE:
            return p(dist.reduce, out, dst=root, op=rop)
        if op is _N.ALL_REDUCE:
            return p(dist.all_reduce, out, op=rop)
        if op is _N.ALL_GATHER:
            return p(_ALL_GATHER, out, inp)
        if op is _N.REDUCE_SCATTER:
            return p(_REDUCE_SCATTER, out, inp, op=rop)
        if op is _N.SCATTER:
            return p(dist.scatter, out, list(inp.chunk(n)) if rank == root else None, src=root)
        if op is _N.GATHER:
            return p(dist.gather, inp, list(out.chunk(n)) if rank == root else None, dst=root)
        if op is _N.ALL_TO_ALL:
            return p(dist.all_to_all_single, out, inp)
        if op is _N.SEND_RECV:
            return p(_send_recv, out, inp, rank, n)
        raise ValueError(f"no torch.distributed call for {op}")

    def call(self, case: Case, bufs: BufferSet) -> None:
        self.bind(case, bufs)()

    def synchronize(self) -> None:
        if self.device_type == "cuda":
            torch.cuda.synchronize(self.devices[0])

    def barrier(self) -> None:
        import torch.distributed as dist

        if self.device_type == "cuda":
            dist.barrier(device_ids=[self.devices[0].index])
        else:
            dist.barrier()


LOCAL_FACTORIES: dict[str, type[Backend]] = {"torch.cuda.comm": TorchCudaComm, "gpucomm.comm": GpucommComm}
"""One-process backends by name; each is built as ``factory(devices)`` (tests swap in doubles here)."""
PROCESS_GROUP_FACTORIES: dict[str, type[Backend]] = {"torch.distributed": TorchDistributed,
                                                     "gpucomm.dist": GpucommDist}
"""Process-group backends by name; each is built as ``factory(device)`` inside a rank."""


def _tensor_collectives():
    """torch >= 2.13 renamed the tensor forms (``*_single``) and deprecated the old names; use what exists."""
    import torch.distributed as dist

    return (getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor,
            getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor)


_ALL_GATHER, _REDUCE_SCATTER = _tensor_collectives()


_DIST_OP_NAMES = {ReduceOp.SUM: "SUM", ReduceOp.AVG: "AVG", ReduceOp.MAX: "MAX", ReduceOp.MIN: "MIN",
                  ReduceOp.PROD: "PRODUCT"}  # torch.distributed spells prod PRODUCT


def _dist_op(reduce_op: ReduceOp | None):
    import torch.distributed as dist

    if reduce_op is None:
        return dist.ReduceOp.SUM
    return getattr(dist.ReduceOp, _DIST_OP_NAMES[reduce_op])


def _send_recv(out: torch.Tensor, inp: torch.Tensor, rank: int, n: int) -> None:
    """Each rank sends to rank+1 and receives from rank-1; a world of one copies (torch refuses self-sends)."""
    import torch.distributed as dist

    if n == 1:
        out.copy_(inp)
        return
    ops = [dist.P2POp(dist.isend, inp, (rank + 1) % n), dist.P2POp(dist.irecv, out, (rank - 1) % n)]
    for work in dist.batch_isend_irecv(ops):
        work.wait()
