"""The seam: what code outside ``gpucomm/comm/`` may use of comm's insides, and the routes every kernel shares.

It is the only private module of ``gpucomm.comm`` that code outside ``gpucomm/comm/`` may import (the
Communicator does; ``tests/test_imports.py`` enforces it), so comm may reorganise everything else.  It
offers:

* :func:`bind` — a collective's prepared form, by its public function's name: the function's own checks
  (same errors), then ``(run, result, touched)``: a zero-argument callable that reruns the collective on
  these buffers with no checks (everything that depends only on where the buffers live — aliasing, the
  NCCL/copy/torch-C++ route — decided once), what the public function would return, and every tensor
  it writes.  The engine of :func:`gpucomm.comm.prepare` and ``LocalCommunicator.prepare``.  Each kernel
  module registers the forms of its own functions (:func:`gpucomm.comm._prepare.prepared_form`).
* :func:`capture` — CUDA-graph capture of such a ``run``.
* torch.cuda.comm's own C++ loops (:data:`BROADCAST_OUT`, :data:`SCATTER_OUT`, :data:`SCATTER`): the
  **one** home of torch's direct routes, and the small helpers every kernel module's binding uses.

The kernel modules import this module; it imports none of them (no cycle).
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Sequence

import torch

from gpucomm.comm import _copy
from gpucomm.comm._graph import capture
from gpucomm.comm._prepare import bind, forms

__all__ = [
    "BROADCAST_OUT",
    "SCATTER",
    "SCATTER_OUT",
    "Run",
    "bind",
    "bind_copies",
    "capture",
    "forms",
    "noop",
    "one_device",
    "cuda_alike",
    "direct",
]

Run = Callable[[], object]

# torch.cuda.comm's own C++ loops (CUDA builds only).  When every tensor is a CUDA tensor of one
# dtype and nothing aliases, they issue exactly the copies the copy path would, without a Python
# round trip per copy: the cheapest correct route for latency-bound calls.
BROADCAST_OUT = getattr(torch._C, "_broadcast_out", None)
"""``torch.cuda.comm.broadcast(t, out=...)``'s C++: checks every shape, then one ``copy_`` per output."""
SCATTER_OUT = getattr(torch._C, "_scatter_out", None)
"""``torch.cuda.comm.scatter(t, out=...)``'s C++: checks, then one ``copy_`` per chunk."""
SCATTER = getattr(torch._C, "_scatter", None)
"""``torch.cuda.comm.scatter(t, devices)``'s C++: each chunk ``.to(device, non_blocking=True)``."""


_TENSOR_ONLY = {torch.Tensor}
_REQUIRES_GRAD = operator.attrgetter("requires_grad")
_UNTYPED = torch.Tensor.untyped_storage
_STORAGE_PTR = torch.UntypedStorage.data_ptr


def direct(src: torch.Tensor, outs: Sequence[torch.Tensor]) -> bool:
    """Whether torch's C++ loops (:data:`BROADCAST_OUT`, :data:`SCATTER_OUT`) may take ``src`` and ``outs`` as
    they are: only the checks those loops do not make, each one C-level pass.

    The loops check, before their first copy, that every output is a CUDA tensor of the right shape (a
    RuntimeError otherwise: the caller then runs its full checks, which name the problem), and they cast
    dtypes as ``copy_`` does.  They do not check aliasing, so every tensor here must be a plain strided
    tensor in a storage of its own (an output in the source's storage, or two outputs in one, would race),
    and no output may need autograd (``copy_`` would refuse it after writing the ones before it).
    """
    if BROADCAST_OUT is None:
        return False
    group = [src, *outs]
    if set(map(type, group)) != _TENSOR_ONLY:
        return False
    try:
        if len(set(map(_STORAGE_PTR, map(_UNTYPED, group)))) != len(group):
            return False
    except (RuntimeError, NotImplementedError):  # a sparse or otherwise storage-less tensor
        return False
    return not (torch.is_grad_enabled() and any(map(_REQUIRES_GRAD, outs)))


def noop() -> None:
    """The run of a collective with nothing to move (a world of one, outputs that are the inputs)."""
    return None


def cuda_alike(outs: Sequence[torch.Tensor], src: torch.Tensor) -> bool:
    """Every tensor on CUDA with ``src``'s dtype (what torch's C++ loops need besides no aliasing, which the
    caller has established)."""
    dtype = src.dtype
    return src.is_cuda and all(t.is_cuda and t.dtype == dtype for t in outs)


def one_device(dsts: Sequence[torch.Tensor], *srcs: torch.Tensor) -> bool:
    """Every tensor on ``srcs[0]``'s device."""
    device = srcs[0].device
    return all(t.device == device for t in dsts) and all(t.device == device for t in srcs)


def bind_copies(dsts: list[torch.Tensor], srcs: list[torch.Tensor]) -> Run:
    """``dsts[i].copy_(srcs[i])`` for disjoint pairs on one device, in one call where it pays.

    :func:`gpucomm.comm._copy.copy_many`'s choice (one fused ``_foreach_copy_`` or a loop of
    ``copy_``), made once here instead of on every call.
    """
    if (_copy._FOREACH_COPY is not None
            and (len(dsts) >= _copy.FOREACH_MIN_COPIES or len(dsts) > 1 and dsts[0].is_cpu)
            and dsts[0].nbytes <= _copy.FOREACH_MAX_BYTES and _copy._batchable(dsts, srcs, None)
            and not any(t.requires_grad for t in (*dsts, *srcs))):
        return functools.partial(_copy._FOREACH_COPY, dsts, srcs, non_blocking=True)
    if len(dsts) == 1:
        return functools.partial(dsts[0].copy_, srcs[0], non_blocking=True)
    return functools.partial(_copy_loop, [(d.copy_, s) for d, s in zip(dsts, srcs, strict=True)])


def _copy_loop(pairs: list) -> None:
    for copy_, src in pairs:
        copy_(src, non_blocking=True)
