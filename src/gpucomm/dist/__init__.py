"""``gpucomm.dist`` — the collectives across processes, on ``torch.distributed``.

torch.distributed is the engine (NCCL on GPUs, gloo on CPU); this module adds what people hand-roll
badly: process-group setup (:func:`init`, :func:`shutdown`), a local launcher with failure handling
(:func:`launch`), an opt-in cross-rank shape check (:mod:`gpucomm.dist.debug`), and collectives
whose signatures mirror ``torch.distributed`` exactly (``tensor, op, group, async_op``) while
accepting our str ops (``"sum"``, ``"avg"``, ``"max"``, ``"min"``, ``"prod"``)::

    import gpucomm.dist as gd

    def work():
        t = torch.ones(4)
        gd.all_reduce(t, op="avg")
        return t.tolist()

    gd.launch(work, 2)          # [[1.0, 1.0, 1.0, 1.0], [1.0, 1.0, 1.0, 1.0]]

Semantics that differ from calling torch directly:

* ``op="avg"`` is native on NCCL; on every other backend (older torch releases' gloo has no
  ``ReduceOp.AVG``) it is a sum followed by an in-place division by the world size, in the tensor's
  dtype, so it behaves the same on every torch version.  With
  ``async_op=True`` the division happens in the returned work's ``wait()``.  ``avg`` on integer or
  bool tensors raises ``ValueError`` on every backend.
* :func:`reduce` leaves the non-destination ranks' tensors as they were on every backend (gloo
  uses them as scratch space; here it is given a copy).
* :func:`send_recv` is the ring shift the Communicator needs: send to ``rank+1``, receive from
  ``rank-1`` (mod world size); a world of one copies.

Ranks (``src``, ``dst``) are global ranks, as in torch.

:func:`prepare` checks a collective once and returns a callable that reissues the raw
torch.distributed call on the same tensors (MPI-4's persistent collectives, ``MPI_Allreduce_init``):
use it in loops where the arguments stay the same, e.g. gradient buckets.

Layout: the collectives live in :mod:`gpucomm.dist.ops`, prepared ones in
:mod:`gpucomm.dist.prepared`, set-up in :mod:`gpucomm.dist.process_group`, the launcher in
:mod:`gpucomm.dist.launch`; this module only gathers them.  None of them imports this package
module, so there is no import cycle.
"""

from __future__ import annotations

import gpucomm.dist.debug as debug
from gpucomm.dist.debug import CollectiveMismatchError, set_debug_check
from gpucomm.dist.launch import LaunchError, RankFailure, check_nprocs, launch, max_nprocs
from gpucomm.dist.ops import (
    P2POp,
    all_gather_into_tensor,
    all_reduce,
    all_to_all_single,
    backend,
    barrier,
    batch_isend_irecv,
    broadcast,
    gather,
    get_rank,
    get_world_size,
    irecv,
    isend,
    recv,
    reduce,
    reduce_scatter_tensor,
    scatter,
    send,
    send_recv,
)
from gpucomm.dist.prepared import PREPARABLE, prepare
from gpucomm.prepared import Prepared
from gpucomm.dist.process_group import (
    ProcessGroup,
    backend_for,
    current,
    device,
    init,
    is_initialized,
    read_env,
    shutdown,
)

__all__ = [
    "PREPARABLE",
    "CollectiveMismatchError",
    "LaunchError",
    "P2POp",
    "Prepared",
    "ProcessGroup",
    "RankFailure",
    "all_gather_into_tensor",
    "all_reduce",
    "all_to_all_single",
    "backend",
    "backend_for",
    "barrier",
    "batch_isend_irecv",
    "broadcast",
    "check_nprocs",
    "current",
    "debug",
    "device",
    "gather",
    "get_rank",
    "get_world_size",
    "init",
    "irecv",
    "is_initialized",
    "isend",
    "launch",
    "max_nprocs",
    "prepare",
    "read_env",
    "recv",
    "reduce",
    "reduce_scatter_tensor",
    "scatter",
    "send",
    "send_recv",
    "set_debug_check",
    "shutdown",
]
