"""One process, many devices: a drop-in for ``torch.cuda.comm`` plus the collectives it lacks.

The six functions of ``torch.cuda.comm`` keep their exact signatures, return types (list vs tuple)
and semantics — :func:`broadcast`, :func:`broadcast_coalesced`, :func:`reduce_add`,
:func:`reduce_add_coalesced`, :func:`scatter`, :func:`gather` — and five collectives are added in the
same style: :func:`all_reduce`, :func:`reduce`, :func:`all_gather`, :func:`reduce_scatter`,
:func:`all_to_all` (plus :func:`send_recv`, the ring shift the Communicator layer needs).  New
tensors are returned; ``out=`` lets the caller supply the outputs, and for the added collectives
``out`` may alias the inputs (in-place operation).

Every function also runs on CPU tensors with device lists such as ``["cpu", "cpu", "cpu"]``, so
every semantic can be tested without a GPU.  On GPUs NCCL (``torch.cuda.nccl``) is used where it
applies (dense, contiguous, one dtype, distinct devices), a copy path with cached side streams
otherwise, and host transfers above 256 KiB go through pinned memory with every device's link driven
at once (smaller ones run as torch runs them).

Differences from torch, all deliberate (docs/semantics.md lists them): errors are ``TypeError`` /
``ValueError`` with messages that name the argument; CPU devices are accepted everywhere; complex
tensors keep their dtype (torch returns real views); mismatched dtypes are rejected by the
reductions (torch's fallback silently promotes).

:func:`prepare` checks a call once and returns a callable that reruns it on the same buffers
without per-call checks (optionally captured into a CUDA graph): see :mod:`gpucomm.comm._prepare`.

Operations are enqueued on each device's current stream and return without synchronising the host,
except where a result lives on the CPU (it is complete on return).
"""

from gpucomm.comm._all_to_all_v import all_to_all_v
from gpucomm.comm._broadcast import broadcast, broadcast_coalesced
from gpucomm.comm._exchange import all_gather, all_to_all, send_recv
from gpucomm.comm._prepare import prepare
from gpucomm.comm._reductions import all_reduce, reduce, reduce_add, reduce_add_coalesced, reduce_scatter
from gpucomm.comm._scatter_gather import gather, scatter
from gpucomm.prepared import Prepared as Prepared  # the type prepare returns (re-exported)

__all__ = [  # Prepared (the type prepare returns) is importable but not a function of this table
    "all_gather",
    "all_reduce",
    "all_to_all",
    "all_to_all_v",
    "broadcast",
    "broadcast_coalesced",
    "gather",
    "prepare",
    "reduce",
    "reduce_add",
    "reduce_add_coalesced",
    "reduce_scatter",
    "scatter",
    "send_recv",
]
