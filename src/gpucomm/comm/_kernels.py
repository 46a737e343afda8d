"""The seam: gpucomm.comm's unchecked kernels, for callers that have already checked their arguments.

Every public function of :mod:`gpucomm.comm` is *checks, then a kernel*; this module names the
kernels.  It is the only private module of ``gpucomm.comm`` that code outside ``gpucomm/comm/`` may
import (the Communicator does; a test enforces it), so comm may reorganise everything else freely.

Contract, for every kernel below:

* **Nothing is checked.**  The caller guarantees what the matching public function would check:
  tensors are dense (strided) and on ``cpu`` or indexed ``cuda`` devices, one dtype, the shapes the
  collective needs, outputs on their participant's device, and ``op`` a parsed :class:`ReduceOp`
  valid for the dtype (:func:`check_op_dtype`).  Violations give torch's own errors or wrong
  results, so call the public function when in doubt.
* **Outputs are supplied** (``outs``/``out``) and written in place; they may alias inputs exactly
  where the public function's ``out=`` allows it.
* Work is enqueued on each device's current stream, as the public functions do; a CPU result is
  complete on return.

The ``bind_*`` functions do the same work as their kernel but decide, once, everything that depends
only on where the buffers live (aliasing, the NCCL/copy/torch-C++ route), and return a zero-argument
callable that reruns it: the engine of :func:`gpucomm.comm.prepare` and ``Communicator.prepare``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

import torch

from gpucomm.collectives import ReduceOp
from gpucomm.comm import _broadcast, _copy, _exchange, _nccl, _reduce, _reductions, _scatter_gather
from gpucomm.comm._graph import capture
from gpucomm.comm._reduce import check_op_dtype, reduce_stacked

__all__ = [
    "UNREDUCIBLE",
    "all_gather",
    "all_reduce",
    "all_to_all",
    "any_overlap",
    "bind_all_gather",
    "bind_all_reduce",
    "bind_all_to_all",
    "bind_broadcast",
    "bind_copies",
    "bind_gather",
    "bind_noop",
    "bind_reduce",
    "bind_reduce_scatter",
    "bind_scatter",
    "bind_send_recv",
    "broadcast",
    "capture",
    "check_op_dtype",
    "gather",
    "noop",
    "reduce",
    "reduce_scatter",
    "scatter",
    "send_recv",
]

Run = Callable[[], object]

# torch.cuda.comm's own C++ loops (CUDA builds only).  When every tensor is a CUDA tensor of one
# dtype and nothing aliases, they issue exactly the copies the copy path would, without a Python
# round trip per copy: the cheapest correct route for latency-bound calls.
_BROADCAST_OUT = getattr(torch._C, "_broadcast_out", None)
_SCATTER_OUT = getattr(torch._C, "_scatter_out", None)
_FOREACH_COPY = getattr(torch, "_foreach_copy_", None)

any_overlap = _copy.any_overlap


def noop() -> None:
    """The kernel of a collective with nothing to move (a world of one, outputs that are the inputs)."""
    return None


def bind_noop() -> Run:
    return noop


UNREDUCIBLE = _reductions._UNREDUCIBLE
"""dtypes torch stores but cannot reduce (no sum/max/prod kernels): the reductions refuse them."""


def _plain_cuda(outs: Sequence[torch.Tensor], src: torch.Tensor) -> bool:
    """Every tensor on CUDA with ``src``'s dtype, and no output in the same storage as ``src``."""
    dtype = src.dtype
    return (src.is_cuda and all(t.is_cuda and t.dtype == dtype for t in outs)
            and not _copy.any_overlap(outs, [src]))


# ----- broadcast ----------------------------------------------------------------------------------------
def broadcast(src: torch.Tensor, outs: list[torch.Tensor]) -> None:
    """``o.copy_(src)`` for every output (outputs may be ``src`` itself or overlap it)."""
    if _BROADCAST_OUT is not None and _plain_cuda(outs, src):
        _BROADCAST_OUT(src, outs)
        return
    _broadcast._into(src, outs)


def bind_broadcast(src: torch.Tensor, outs: list[torch.Tensor]) -> Run:
    targets = [o for o in outs if o is not src]
    if not targets:
        return noop
    if _copy.any_overlap(targets, [src]) or src.layout != torch.strided:
        return functools.partial(_broadcast._into, src, targets)
    if _nccl.usable([src, *targets]):
        return functools.partial(_nccl.broadcast, [src, *targets], 0)
    if _BROADCAST_OUT is not None and _plain_cuda(targets, src):
        return functools.partial(_BROADCAST_OUT, src, targets)
    if _one_device(targets, src):
        return bind_copies(targets, [src] * len(targets))
    return functools.partial(_copy.copy_all, [(t, src) for t in targets])


def _one_device(dsts: Sequence[torch.Tensor], *srcs: torch.Tensor) -> bool:
    device = srcs[0].device
    return all(t.device == device for t in dsts) and all(t.device == device for t in srcs)


def bind_copies(dsts: list[torch.Tensor], srcs: list[torch.Tensor]) -> Run:
    """``dsts[i].copy_(srcs[i])`` for disjoint pairs on one device, in one call where it pays.

    :func:`gpucomm.comm._copy.copy_many`'s choice (one fused ``_foreach_copy_`` or a loop of
    ``copy_``), made once here instead of on every call.
    """
    if (_FOREACH_COPY is not None and (len(dsts) >= _copy.FOREACH_MIN_COPIES or len(dsts) > 1 and dsts[0].is_cpu)
            and dsts[0].nbytes <= _copy.FOREACH_MAX_BYTES and _copy._batchable(dsts, srcs, None)
            and not any(t.requires_grad for t in (*dsts, *srcs))):
        return functools.partial(_FOREACH_COPY, dsts, srcs, non_blocking=True)
    if len(dsts) == 1:
        return functools.partial(dsts[0].copy_, srcs[0], non_blocking=True)
    return functools.partial(_copy_loop, [(d.copy_, s) for d, s in zip(dsts, srcs, strict=True)])


def _copy_loop(pairs: list) -> None:
    for copy_, src in pairs:
        copy_(src, non_blocking=True)


# ----- reductions ---------------------------------------------------------------------------------------
def reduce(ts: list[torch.Tensor], out: torch.Tensor, op: ReduceOp) -> None:
    """``out`` = the reduction of ``ts`` (``out`` may be one of them)."""
    _reductions._reduce_to(ts, out.device, op, out)


def bind_reduce(ts: list[torch.Tensor], out: torch.Tensor, op: ReduceOp) -> Run:
    stacked = _bind_stacked(ts, out, op)
    if stacked is not None:
        return stacked
    return functools.partial(_reductions._reduce_to, ts, out.device, op, out)


def all_reduce(ts: list[torch.Tensor], outs: list[torch.Tensor], op: ReduceOp) -> None:
    """``outs[i]`` = the reduction of ``ts`` (``outs`` may be ``ts``: in place)."""
    _reductions._all_reduce_checked(ts, op, outs, [t.device for t in ts])


def bind_all_reduce(ts: list[torch.Tensor], outs: list[torch.Tensor], op: ReduceOp) -> Run:
    if _nccl.usable(ts + outs, distinct=ts, op=op):
        return functools.partial(_nccl.all_reduce, ts, outs, op)
    first = outs[0]
    stacked = _bind_stacked(ts, first, op, rest=outs[1:])
    if stacked is not None:
        return stacked
    return functools.partial(_reductions._all_reduce_checked, ts, op, outs, [t.device for t in ts])


def _bind_stacked(ts: list[torch.Tensor], out: torch.Tensor, op: ReduceOp,
                  rest: list[torch.Tensor] | None = None) -> Run | None:
    """Stack-then-reduce into a scratch buffer allocated once, when everything shares one device.

    :func:`gpucomm.comm._reduce.combine`'s stacked strategy (two kernels whatever n is), without its
    per-call allocation; ``rest`` (all-reduce) then receives copies of ``out``.  Outputs may be
    inputs (the stack reads every input before anything is written).  None when the tensors are
    spread over devices, too large to stack (all_reduce's limit when ``rest`` is given, reduce's
    otherwise: :func:`gpucomm.comm._reduce.stack_max_bytes`), not strided, or need autograd: the
    caller then binds the general kernel.
    """
    first = ts[0]
    group = [*ts, out, *(rest or [])]
    if (len(ts) < 2 or any(t.layout != torch.strided for t in group) or not _one_device(group, first)
            or len(ts) * first.nbytes > _reduce.stack_max_bytes("reduce" if rest is None else "all_reduce")
            or any(t.requires_grad for t in group) and torch.is_grad_enabled()):
        return None
    if rest and _copy.any_overlap(rest, [out]):
        return None
    scratch = torch.empty((len(ts), *first.shape), dtype=first.dtype, device=first.device)
    copies = bind_copies(rest, [out] * len(rest)) if rest else None
    stack = torch.stack

    def run() -> None:
        stack(ts, out=scratch)  # the stack snapshots the inputs: out may be one of them
        reduce_stacked(scratch, op, out)
        if copies is not None:
            copies()

    return run


def reduce_scatter(ts: list[torch.Tensor], outs: list[torch.Tensor], op: ReduceOp, dim: int = 0) -> None:
    """``outs[i]`` = chunk i (of n along ``dim``) of the reduction of ``ts``."""
    _reductions._reduce_scatter_checked(ts, dim, op, list(outs[0].shape), [t.device for t in ts], outs)


def bind_reduce_scatter(ts: list[torch.Tensor], outs: list[torch.Tensor], op: ReduceOp, dim: int = 0) -> Run:
    return functools.partial(_reductions._reduce_scatter_checked, ts, dim, op, list(outs[0].shape),
                             [t.device for t in ts], outs)


# ----- exchanges ----------------------------------------------------------------------------------------
def all_gather(ts: list[torch.Tensor], outs: list[torch.Tensor], dim: int = 0) -> None:
    """``outs[i]`` = ``torch.cat(ts, dim)``."""
    _exchange._all_gather_checked(ts, dim, list(outs[0].shape), [t.device for t in ts], outs)


def bind_all_gather(ts: list[torch.Tensor], outs: list[torch.Tensor], dim: int = 0) -> Run:
    return functools.partial(_exchange._all_gather_checked, ts, dim, list(outs[0].shape),
                             [t.device for t in ts], outs)


def scatter(src: torch.Tensor, outs: list[torch.Tensor], dim: int = 0, streams: list | None = None) -> None:
    """``outs[i]`` = the i-th piece of ``src`` along ``dim`` (pieces sized by the outputs)."""
    _scatter_gather.scatter_into(src, outs, dim, streams, overlap=_copy.any_overlap(outs, [src]))


def bind_scatter(src: torch.Tensor, outs: list[torch.Tensor], dim: int = 0, streams: list | None = None) -> Run:
    overlap = _copy.any_overlap(outs, [src])
    chunks = list(src.split([o.shape[dim] for o in outs], dim))
    if overlap and all(_copy.same_view(o, c) for o, c in zip(outs, chunks, strict=True)):
        return noop  # every output is its own chunk of the source: nothing to move
    if not overlap and streams is None:
        if _SCATTER_OUT is not None and src.is_cuda and all(o.is_cuda for o in outs):
            return functools.partial(_SCATTER_OUT, src, outs, dim, None)  # torch.cuda.comm's own C++ loop
        if _one_device(outs, src):
            return bind_copies(outs, chunks)
    return functools.partial(_scatter_gather.scatter_into, src, outs, dim, streams, overlap=overlap)


def gather(ts: list[torch.Tensor], out: torch.Tensor, dim: int = 0) -> None:
    """``out`` = ``torch.cat(ts, dim)`` (``out`` may overlap inputs)."""
    _scatter_gather._gather_into(ts, out, dim, fresh=False)


def bind_gather(ts: list[torch.Tensor], out: torch.Tensor, dim: int = 0) -> Run:
    fresh = not _copy.any_overlap([out], ts)
    if fresh and _one_device(ts, out) and all(t.dtype == out.dtype for t in ts) and _scatter_gather.cat_fits(out):
        return functools.partial(torch.cat, ts, dim, out=out)  # one kernel instead of n copies
    return functools.partial(_scatter_gather._gather_into, ts, out, dim, fresh=fresh)


def all_to_all(dsts: list[torch.Tensor], srcs: list[torch.Tensor]) -> None:
    """``dsts[k].copy_(srcs[k])`` for every k, as one exchange (destinations may alias sources)."""
    one = len({t.device for t in dsts}) == 1 and dsts[0].device == srcs[0].device
    _exchange._all_to_all_copies(dsts, srcs, one, {t.dtype for t in srcs})


def bind_all_to_all(dsts: list[torch.Tensor], srcs: list[torch.Tensor]) -> Run:
    one = len({t.device for t in (*dsts, *srcs)}) == 1
    return functools.partial(_exchange._all_to_all_copies, dsts, srcs, one, {t.dtype for t in srcs})


def send_recv(ts: list[torch.Tensor], outs: list[torch.Tensor]) -> None:
    """``outs[i]`` = ``ts[i - 1]`` (``outs`` may be ``ts``)."""
    _exchange._send_recv_checked(ts, outs)


def bind_send_recv(ts: list[torch.Tensor], outs: list[torch.Tensor]) -> Run:
    return functools.partial(_exchange._send_recv_checked, ts, outs)
