"""The reducing functions: ``reduce_add(_coalesced)`` (torch's) and ``reduce``, ``all_reduce``, ``reduce_scatter``."""

from __future__ import annotations

import functools
import math
import operator
from typing import Any

import torch

from gpucomm._validate import check_same_dtype, check_tensor, describe, fail_value
from gpucomm.collectives import ReduceOp, parse_op
from gpucomm.collectives.spec import OPS_BY_NAME
from gpucomm.comm import _coalesce, _copy, _kernels, _nccl, _reduce
from gpucomm.comm._alloc import empty_like_on, empty_on, replicate
from gpucomm.comm._checks import (
    DEVICE_OF,
    DTYPE_OF,
    LAYOUT_OF,
    SHAPE_OF,
    TORCH_REFUSALS,
    check_dim,
    check_disjoint,
    check_int,
    check_outputs,
    check_same_shape,
    check_tensors,
    dense_like,
    destination_arg,
    needs_grad,
    one_device,
)
from gpucomm.comm._prepare import prepared_form
from gpucomm.comm._reduce import check_op_dtype, combine, reduce_stacked
from gpucomm.comm._scatter_gather import default_destination

__all__ = ["all_reduce", "bind_all_reduce", "bind_one_device", "bind_reduce", "bind_reduce_scatter", "bind_stacked", "check_all_reduce", "check_reduce", "check_reduce_add", "check_reduce_scatter", "reduce",
           "reduce_add", "reduce_add_coalesced", "reduce_scatter"]


# ----- shared checks ---------------------------------------------------------------------------------
_UNREDUCIBLE = frozenset(getattr(torch, name) for name in ("uint16", "uint32", "uint64") if hasattr(torch, name))
"""Unsigned dtypes that torch stores but cannot add (``sum`` is not implemented for them)."""


def _inputs(tensors: Any, arg: str, *, dense: bool = True) -> list[torch.Tensor]:
    ts = check_tensors(tensors, arg)
    if ts[0].dtype in _UNREDUCIBLE:
        raise fail_value(f"{arg}[0]", "a dtype torch can reduce (uint16/32/64 have no sum, max or prod)",
                         describe(ts[0]), "cast to a signed type first, e.g. t.to(torch.int64)")
    if dense_like(ts, ts[0].shape, ts[0].dtype):
        return ts  # the common case, in bulk
    check_same_shape(ts, arg)
    check_same_dtype(ts, arg)
    if dense:
        for i, t in enumerate(ts):
            if t.layout != torch.strided:
                raise fail_value(f"{arg}[{i}]", "a dense (strided) tensor", describe(t),
                                 "convert it with .to_dense(); sparse tensors are summed by reduce_add")
    return ts


_REQUIRES_GRAD = operator.attrgetter("requires_grad")


def _op(op: Any, dtype: torch.dtype, fn: str) -> ReduceOp:
    # an exact name or a ReduceOp answered by one lookup; anything else parsed (and refused) in full
    o = op if type(op) is ReduceOp else OPS_BY_NAME.get(op) if type(op) is str else None
    if o is None:
        o = parse_op(op, "op")
    check_op_dtype(o, dtype, fn)
    return o


# ----- the plain calls' one pass --------------------------------------------------------------------
# A plain call on one device runs torch.stack and one reduction kernel with out= (torch.sum, torch.mean,
# torch.prod, torch.amax, torch.amin), which refuse before writing anything: inputs of different shapes
# or devices (stack), an output of the wrong dtype or device, and any tensor that needs autograd (out=
# kernels are not differentiable).  What they do not refuse is asked here, each in one C-level pass: one
# dtype among the inputs (stack would promote), a dtype and op gpucomm reduces, outputs of the inputs'
# shape and dtype (out= kernels resize a wrong shape, mean casts), on their participants' devices, in
# storages of their own (copies of the result would race).  Anything else — and any refusal — goes to the
# named checks (check_reduce, check_all_reduce, check_reduce_scatter), which raise gpucomm's errors, and to
# the general route.  Nothing is written before both have passed.

_STRIDED = torch.strided
_IS = operator.is_
_SUM, _AVG, _MAX, _MIN = ReduceOp.SUM, ReduceOp.AVG, ReduceOp.MAX, ReduceOp.MIN  # module globals: no enum lookups


def _lean_op(ts: Any, op: Any) -> ReduceOp | None:
    """``op`` parsed, when ``ts`` is a non-empty list of tensors of one dtype that gpucomm reduces with it;
    None for anything the named checks must look at (they raise what is wrong, or accept it)."""
    if not ((type(ts) is list or type(ts) is tuple) and ts):
        return None
    dtype = ts[0].dtype
    o = op if type(op) is ReduceOp else OPS_BY_NAME.get(op) if type(op) is str else None
    if o is None or dtype in _UNREDUCIBLE or set(map(DTYPE_OF, ts)) != {dtype}:
        return None
    if o is not _SUM and (o is _AVG and not (dtype.is_floating_point or dtype.is_complex)
                          or dtype.is_complex and (o is _MAX or o is _MIN)):
        return None
    return o


def _lean_reduce(ts: Any, op: Any, out: Any, devices: list[torch.device] | None) -> bool:
    """``reduce(ts, None, op, out=out)`` in one pass when every input is on one device (``devices``: their
    devices, when the caller knows them; else asked): True when done, False when nothing was written (the
    named checks decide)."""
    try:
        o = _lean_op(ts, op)
        devices = devices or one_device(ts)
        if o is None or devices is None or type(out) is not torch.Tensor:
            return False
        first = ts[0]
        if out.shape != first.shape or out.dtype != first.dtype:  # out= kernels resize (and mean casts)
            return False
        if _reduce.stacks("reduce", first.nbytes):
            stacked = torch.stack(ts)  # refuses other shapes and devices; snapshots the inputs (out may be one)
            if stacked.layout is not _STRIDED:
                return False
            reduce_stacked(stacked, o, out)  # refuses out's device and autograd before writing
            return True
        rest = [t for t in ts if t is not out]  # chained in place: out may be an input, but no other may share it
        if (out.device != devices[0] or len(set(map(SHAPE_OF, ts))) != 1 or not _kernels.unshared(out, rest)
                or needs_grad(out, *ts)):  # the chain writes out step by step: nothing may refuse after the first
            return False
        _reduce.chain(ts, o, out)
        return True
    except TORCH_REFUSALS:
        return False


def _lean_outputs(ts: Any, out: Any, shape: Any, devices: list[torch.device]) -> bool:
    """Whether ``out`` holds one output per input, each of ``shape`` and the inputs' dtype, on the input's
    device, in a storage of its own (sharing none with an input either); ``out=ts`` (in place): whether the
    inputs' storages are their own."""
    if out is ts or (type(out) is list or type(out) is tuple) and len(out) == len(ts) and all(map(_IS, out, ts)):
        return _kernels.unshared(ts[0], ts[1:])
    return ((type(out) is list or type(out) is tuple) and len(out) == len(ts)
            and set(map(SHAPE_OF, out)) == {shape} and set(map(DTYPE_OF, out)) == {ts[0].dtype}
            and list(map(DEVICE_OF, out)) == devices and _kernels.unshared(out[0], [*out[1:], *ts]))


def _lean_all_reduce(ts: Any, op: Any, out: Any,
                     devices: list[torch.device] | None = None) -> list[torch.Tensor] | None:
    """``all_reduce(ts, op, out=out)`` in one pass on one device, stacked or chained by
    :func:`gpucomm.comm._reduce.stacks` (``devices``: the inputs' devices, all one, when the caller
    knows them): the outputs, or None when nothing was written (the named
    checks decide)."""
    try:
        o = _lean_op(ts, op)
        if o is None:
            return None
        devices = devices or one_device(ts)
        n, first = len(ts), ts[0]
        if (devices is None or out is not None and not _lean_outputs(ts, out, first.shape, devices)
                or needs_grad(*ts, *(out or ()))):
            return None
        if _reduce.stacks("all_reduce", first.nbytes):
            stacked = torch.stack(ts)  # refuses other shapes; snapshots the inputs (outputs may be them)
            if stacked.layout is not _STRIDED:
                return None
            result = reduce_stacked(stacked, o, None if out is None else out[0])
        else:  # chained: it writes out[0] step by step, so nothing it would refuse may reach it
            if n < 2 or len(set(map(SHAPE_OF, ts))) != 1 or set(map(LAYOUT_OF, ts)) != {_STRIDED}:
                return None
            result = _reduce.chain(ts, o, None if out is None else out[0])  # out[0] is ts[0] or shares nothing
        if out is None:
            return [result, *replicate(result, n - 1)]
        if n > 1:
            _copy.copy_many(out[1:], [out[0]] * (n - 1))  # one device: local copies, one call
        return list(out)
    except TORCH_REFUSALS:
        return None


def _lean_reduce_scatter(ts: Any, dim: Any, op: Any, out: Any,
                         devices: list[torch.device] | None = None) -> list[torch.Tensor] | None:
    """``reduce_scatter(ts, dim, op, out=out)`` in one pass on one device, stacked (``devices`` as for
    :func:`_lean_all_reduce`): the outputs, or None when nothing was written (the named checks decide)."""
    try:
        o = _lean_op(ts, op)
        if o is None or type(dim) is not int:
            return None
        devices = devices or one_device(ts)
        n, first = len(ts), ts[0]
        shape = first.shape
        nd = len(shape)
        if devices is None or not -nd <= dim < nd or not _reduce.stacks("reduce_scatter", first.nbytes):
            return None
        d = dim % nd
        c, rem = divmod(shape[d], n)
        if rem or needs_grad(*ts, *(out or ())):
            return None
        if out is not None and not _lean_outputs(ts, out, (*shape[:d], c, *shape[d + 1:]), devices):
            return None
        stacked = torch.stack(ts)  # refuses other shapes; snapshots the inputs
        if stacked.layout is not _STRIDED:
            return None
        chunks = reduce_stacked(stacked, o).split_with_sizes([c] * n, d)
        if out is None:
            return list(chunks)  # views of a fresh buffer: the outputs
        _copy.copy_many(out, chunks)
        return list(out)
    except TORCH_REFUSALS:
        return None


def _check_out_like(outs: list[torch.Tensor], shape: torch.Size | list[int], dtype: torch.dtype,
                    devices: list[torch.device], arg: str = "out") -> None:
    if dense_like(outs, shape, dtype, devices):
        return  # the common case, in bulk
    for i, o in enumerate(outs):
        if list(o.shape) != list(shape):
            raise fail_value(f"{arg}[{i}]", f"shape {list(shape)}", f"shape {list(o.shape)}")
        if o.dtype != dtype:
            raise fail_value(f"{arg}[{i}]", f"dtype {dtype} (the inputs' dtype)", f"dtype {o.dtype}")
        if o.device != devices[i]:
            raise fail_value(f"{arg}[{i}]", f"a tensor on {devices[i]} (participant {i}'s device)",
                             describe(o), f"allocate out[{i}] on {devices[i]}")
        if o.layout != torch.strided:
            raise fail_value(f"{arg}[{i}]", "a dense (strided) tensor", describe(o))


def _check_out_aliasing(outs: list[torch.Tensor], ts: list[torch.Tensor], arg: str = "out", *,
                        overlap: bool = True) -> None:
    """``out`` may *be* inputs (in place) but must not partly overlap one, and must not need autograd.

    Checked before anything is written: a partly overlapping output would be half overwritten
    before torch noticed, and torch's ``out=`` kernels refuse tensors that require grad only after
    some outputs were written.
    """
    if torch.is_grad_enabled() and (any(map(_REQUIRES_GRAD, ts)) or any(map(_REQUIRES_GRAD, outs))):
        culprit = next((f"{arg}[{i}]", o) for i, o in enumerate(outs) if o.requires_grad) if any(
            o.requires_grad for o in outs) else next((f"tensors[{i}]", t) for i, t in enumerate(ts) if t.requires_grad)
        raise fail_value(culprit[0], "a tensor that does not require grad when out= is given (out= writes "
                         "are not differentiable)", describe(culprit[1]) + " with requires_grad=True",
                         "detach it, run under torch.no_grad(), or omit out= to get new tensors")
    # (outs and ts have one length here: check_outputs made it n)
    if not overlap or all(map(operator.is_, outs, ts)) or not _copy.any_overlap(outs, ts):
        return  # disjoint, or exactly in place (out=tensors): the common cases, without n x n extents
    for i, o in enumerate(outs):
        for j, t in enumerate(ts):
            if _copy.overlaps(o, t) and not _copy.same_view(o, t):
                raise fail_value(f"{arg}[{i}]", f"a tensor disjoint from tensors[{j}] or exactly tensors[{j}] "
                                 "(in place)", f"a tensor that partly overlaps tensors[{j}] ({describe(o)})",
                                 "pass out=tensors for an in-place call, or separate outputs")


def _reduce_to(ts: list[torch.Tensor], dest: torch.device, op: ReduceOp,
               out: torch.Tensor | None = None) -> torch.Tensor:
    """The reduction of ``ts`` on ``dest`` (into ``out`` when given; ``out`` may alias inputs)."""
    devs = [t.device for t in ts]
    if devs.count(dest) == len(ts):  # all on the destination (cuda:0 x n, or CPU): no copies at all
        return combine(ts, op, out)
    roots = [i for i, d in enumerate(devs) if d == dest]
    if roots:
        root = roots[-1]
        group = ts if out is None else [*ts, out]
        if _nccl.usable(group, distinct=ts, op=op):
            result = torch.empty_like(ts[root]) if out is None else out
            _nccl.reduce(ts, result, root, op)
            return result
    moved = {}
    pairs = []
    for i, t in enumerate(ts):
        if t.device != dest:
            if t.layout != torch.strided:
                moved[i] = t.to(dest, non_blocking=True)
            else:
                moved[i] = empty_on(t.shape, t.dtype, dest, pinned=t.is_cuda)  # pinned: async D2H
                pairs.append((moved[i], t))
    _copy.copy_all(pairs)
    parts = [moved.get(i, t) for i, t in enumerate(ts)]
    return combine(parts, op, out)


# ----- torch.cuda.comm's two -----------------------------------------------------------------------
def reduce_add(inputs: Any, destination: Any = None) -> torch.Tensor:
    """Sum tensors onto one device (drop-in for ``torch.cuda.comm.reduce_add``).

    Semantics:
        * All inputs have one shape and one dtype; one of them must already be on ``destination``.
        * ``destination`` defaults to the current CUDA device when any input is on a GPU (torch's
          default), else the CPU.
        * A single input is returned as is.  Otherwise the result is a new tensor: NCCL reduce when
          the inputs are dense, contiguous and on distinct GPUs; else the other inputs are moved to
          the destination (on side streams) and added there — inputs already there are not copied.
        * Sparse inputs are summed as sparse tensors.

    Returns:
        ``Tensor``: the elementwise sum, on ``destination``.
    """
    ts, dest = check_reduce_add(inputs, destination)
    if len(ts) == 1:
        return ts[0]
    return _reduce_to(ts, dest, ReduceOp.SUM)


def check_reduce_add(inputs: Any, destination: Any) -> tuple[list[torch.Tensor], torch.device]:
    """:func:`reduce_add`'s checks: ``(inputs, destination)``."""
    ts = _inputs(inputs, "inputs", dense=False)
    dest = default_destination(ts) if destination is None else destination_arg(destination)
    if dest not in [t.device for t in ts]:
        raise fail_value("destination", "a device that holds one of the inputs",
                         f"{dest}, while the inputs are on {sorted({str(t.device) for t in ts})}",
                         "pass destination= one of those devices, or move one input there first")
    return ts, dest


def reduce_add_coalesced(inputs: Any, destination: Any = None,
                         buffer_size: int = 10485760) -> tuple[torch.Tensor, ...]:
    """Sum lists of tensors position by position, in flat buckets (drop-in for ``torch.cuda.comm.reduce_add_coalesced``).

    Semantics:
        * ``inputs[g]`` is the list of tensors on device g; ``inputs[g][k]`` are summed over g.
        * Positions where every tensor is sparse go through :func:`reduce_add` one by one; dense ones
          are flattened per device in ``buffer_size`` buckets, summed and split back.

    Returns:
        ``tuple[Tensor, ...]``: one sum per position, in input order, on ``destination``.
    """
    if isinstance(inputs, torch.Tensor) or not isinstance(inputs, list | tuple):
        raise TypeError(f"inputs: expected a sequence of tensor lists (one list per device), but got "
                        f"{type(inputs).__name__} {describe(inputs)}")
    if not inputs:
        raise fail_value("inputs", "at least one list of tensors", "an empty sequence")
    groups = [check_tensors(g, f"inputs[{i}]", allow_empty=True) for i, g in enumerate(inputs)]
    for i, g in enumerate(groups):
        if len(g) != len(groups[0]):
            raise fail_value(f"inputs[{i}]", f"{len(groups[0])} tensors (like inputs[0])", f"{len(g)}",
                             "every device contributes one tensor per position")
    shapes0, dtypes0 = [t.shape for t in groups[0]], [t.dtype for t in groups[0]]
    for i, g in enumerate(groups[1:], 1):  # list against list (fast); the loop below only names the culprit
        if [t.shape for t in g] != shapes0 or [t.dtype for t in g] != dtypes0:
            for k, (t, ref) in enumerate(zip(g, groups[0], strict=True)):
                for what, got, want in (("shape", list(t.shape), list(ref.shape)), ("dtype", t.dtype, ref.dtype)):
                    if got != want:
                        raise fail_value(f"inputs[{i}][{k}]", f"{what} {want} (that of inputs[0][{k}])",
                                         f"{what} {got}", "position k of every list is summed with the others")
    size = check_int(buffer_size, "buffer_size")
    if size <= 0:
        raise fail_value("buffer_size", "a positive number of bytes", f"{size}")
    flat = [t for g in groups for t in g]
    dest = default_destination(flat) if destination is None else destination_arg(destination)
    if groups[0] and not any(g[0].device == dest for g in groups):
        raise fail_value("destination", "a device that holds one of the input lists",
                         f"{dest}, while the lists are on {[str(g[0].device) for g in groups]}")
    return _coalesce.reduce_buckets(groups, dest, size, reduce_add, _reduce_flats)


def _reduce_flats(flats: list[torch.Tensor], dest: torch.device) -> torch.Tensor:
    """reduce_add's work on a bucket's flat buffers (dense, one shape and dtype, one already on dest):
    its checks were made on the tensors the buffers were flattened from."""
    if len(flats) == 1:
        return flats[0]
    return _reduce_to(flats, dest, ReduceOp.SUM)


# ----- the collectives torch.cuda.comm lacks ------------------------------------------------------
def reduce(tensors: Any, destination: Any, op: Any = "sum", *, out: Any = None) -> torch.Tensor:
    """Reduce ``tensors`` elementwise onto ``destination`` with ``op``.

    Semantics:
        * ``op``: "sum", "avg", "max", "min" or "prod" (or a ReduceOp); "avg" on integer tensors is
          rejected (it would truncate).
        * ``destination`` is any device (it need not hold an input).  With ``out`` the result is
          written into ``out`` and ``destination`` may be None (it is then ``out``'s device; if given
          it must be ``out``'s device).  ``out`` may be one of the inputs (in-place reduce).
        * NCCL reduce when the inputs are dense, contiguous, on distinct GPUs and one of them is on
          the destination; otherwise inputs are moved to the destination and reduced there.

    Returns:
        ``Tensor``: a new tensor on ``destination`` (or ``out``).
    """
    if destination is None and out is not None and _lean_reduce(tensors, op, out, None):
        return out
    ts, dest, o, res = check_reduce(tensors, destination, op, out)
    return _reduce_to(ts, dest, o, res)


def check_reduce(tensors: Any, destination: Any, op: Any, out: Any
                 ) -> tuple[list[torch.Tensor], torch.device, ReduceOp, torch.Tensor | None]:
    """:func:`reduce`'s checks: ``(inputs, destination, op, out or None)`` for :func:`_reduce_to`."""
    ts = _inputs(tensors, "tensors")
    o = _op(op, ts[0].dtype, "reduce")
    if out is None:
        if destination is None:
            raise TypeError("reduce: expected a destination device or out=, but got neither; pass e.g. "
                            "destination='cuda:0' (or 'cpu'), or out=<tensor on the destination>")
        return ts, destination_arg(destination), o, None
    res = check_tensor(out, "out")
    check_tensors([res], "out")
    if destination is not None and destination_arg(destination) != res.device:
        raise fail_value("destination", f"out's device {res.device} (or None)", f"{destination_arg(destination)}",
                         "omit destination when passing out=")
    _check_out_like([res], ts[0].shape, ts[0].dtype, [res.device])
    _check_out_aliasing([res], ts, overlap=False)  # the reduction reads every input before writing out
    return ts, res.device, o, res


def all_reduce(tensors: Any, op: Any = "sum", *, out: Any = None) -> list[torch.Tensor]:
    """Reduce ``tensors`` elementwise and put the result on every participant's device.

    Semantics:
        * Result i is on ``tensors[i].device``; all inputs share shape and dtype.
        * ``out`` (one tensor per input, same shape, dtype and device) receives the results and may
          be ``tensors`` itself (in place).
        * NCCL all-reduce when dense, contiguous, on distinct GPUs; else reduce on
          ``tensors[0]``'s device and copy the result out.

    Returns:
        ``list[Tensor]``: new tensors (or ``out``).
    """
    done = _lean_all_reduce(tensors, op, out)
    if done is not None:
        return done
    ts, o, outs, devices = check_all_reduce(tensors, op, out)
    return _all_reduce_checked(ts, o, outs, devices)


def check_all_reduce(tensors: Any, op: Any, out: Any
                     ) -> tuple[list[torch.Tensor], ReduceOp, list[torch.Tensor] | None, list[torch.device]]:
    """:func:`all_reduce`'s checks: the arguments of :func:`_all_reduce_checked`."""
    ts = _inputs(tensors, "tensors")
    o = _op(op, ts[0].dtype, "all_reduce")
    devices = [t.device for t in ts]
    outs = None
    if out is not None:
        outs = check_outputs(out, len(ts))
        if not all(map(operator.is_, outs, ts)):  # out=tensors (in place): _inputs checked them already
            _check_out_like(outs, ts[0].shape, ts[0].dtype, devices)
        check_disjoint(outs, same_value=True)
        _check_out_aliasing(outs, ts)
    return ts, o, outs, devices


def _all_reduce_checked(ts: list[torch.Tensor], o: ReduceOp, outs: list[torch.Tensor] | None,
                        devices: list[torch.device]) -> list[torch.Tensor]:
    """:func:`all_reduce` after its checks: the Communicator calls this once its own checks (and
    :func:`gpucomm.comm._checks.dense_like`) have established what :func:`all_reduce` would check."""
    if _nccl.usable(ts + (outs or []), distinct=ts, op=o):
        outs = outs or [torch.empty_like(t) for t in ts]
        _nccl.all_reduce(ts, outs, o)
        return outs
    if devices.count(devices[0]) == len(devices):  # one device: reduce once, replicate in one call
        if outs is None:
            result = combine(ts, o, collective="all_reduce")
            if result is ts[0]:
                return replicate(result, len(ts))
            return [result, *replicate(result, len(ts) - 1)]
        # out[0] may alias inputs: combine reads every input before it writes.  The other outputs are
        # written after it, in stream order, so they may alias inputs too.
        result = combine(ts, o, outs[0], collective="all_reduce")
        _copy.copy_many(outs[1:], [result] * (len(outs) - 1))
        return outs
    # Reduce into out[0] when given (it may alias tensors[0]: the reduction reads every input first),
    # then copy that result to every other participant.
    result = _reduce_to(ts, devices[0], o, None if outs is None else outs[0])
    cuda = any(t.is_cuda for t in ts)
    if outs is None:
        fresh = result is not ts[0]
        outs = [result if (i == 0 and fresh) else empty_like_on(result, dev, pinned=cuda)
                for i, dev in enumerate(devices)]
    _copy.copy_all(_copy.protect([(x, result) for x in outs], []))
    return outs


def reduce_scatter(tensors: Any, dim: int = 0, op: Any = "sum", *, out: Any = None) -> list[torch.Tensor]:
    """Reduce ``tensors`` and give participant i chunk i (of n equal chunks along ``dim``).

    Semantics:
        * All inputs share shape and dtype; ``tensors[0].size(dim)`` must divide by n = len(tensors).
        * Output i is chunk i of the reduction, on ``tensors[i].device``; ``out`` supplies them.
        * NCCL reduce-scatter when dense, contiguous, on distinct GPUs and the chunks are contiguous
          (``dim`` 0, or every dim before ``dim`` of size 1); otherwise each device fetches its chunk
          of every input (all at once, on side streams) and reduces locally.

    Returns:
        ``list[Tensor]``: the n chunks (or ``out``).
    """
    done = _lean_reduce_scatter(tensors, dim, op, out)
    if done is not None:
        return done
    ts, d, o, chunk_shape, devices, outs = check_reduce_scatter(tensors, dim, op, out)
    return _reduce_scatter_checked(ts, d, o, chunk_shape, devices, outs)


def check_reduce_scatter(tensors: Any, dim: Any, op: Any, out: Any) -> tuple:
    """:func:`reduce_scatter`'s checks: the arguments of :func:`_reduce_scatter_checked`."""
    ts = _inputs(tensors, "tensors")
    n = len(ts)
    d = check_dim(dim, ts[0].dim(), what="tensors[0]")
    size = ts[0].shape[d]
    if size % n:
        raise fail_value("tensors", f"a size along dim {d} that divides into n={n} equal chunks",
                         f"size {size} ({describe(ts[0])})", f"pad or trim dim {d} to a multiple of {n}")
    o = _op(op, ts[0].dtype, "reduce_scatter")
    chunk_shape = list(ts[0].shape)
    chunk_shape[d] = size // n
    devices = [t.device for t in ts]
    outs = None
    if out is not None:
        outs = check_outputs(out, n)
        _check_out_like(outs, chunk_shape, ts[0].dtype, devices)
        check_disjoint(outs)
        _check_out_aliasing(outs, ts, overlap=False)  # chunks of inputs (NCCL's in-place layout) are fine
    return ts, d, o, chunk_shape, devices, outs


def _reduce_scatter_checked(ts: list[torch.Tensor], d: int, o: ReduceOp, chunk_shape: list[int],
                            devices: list[torch.device], outs: list[torch.Tensor] | None) -> list[torch.Tensor]:
    """:func:`reduce_scatter` after its checks (``chunk_shape``: one output's shape)."""
    n = len(ts)
    c = chunk_shape[d]
    cuda = any(t.is_cuda for t in ts)
    if math.prod(ts[0].shape[:d]) == 1 and _nccl.usable(ts + (outs or []), distinct=ts, op=o):
        outs = outs or [torch.empty(chunk_shape, dtype=t.dtype, device=t.device) for t in ts]
        _nccl.reduce_scatter(ts, outs, o)
        return outs
    if len(set(devices)) == 1:
        full = combine(ts, o, collective="reduce_scatter")
        chunks = [full.narrow(d, i * c, c) for i in range(n)]  # split(0) of an empty dim gives 1 chunk, not n
        if outs is None:
            if full is not ts[0]:  # a fresh buffer: its chunks are the outputs, no copy needed
                return list(chunks)
            outs = [empty_like_on(ch, dev, pinned=cuda) for ch, dev in zip(chunks, devices, strict=True)]
        _copy.copy_all(_copy.protect(list(zip(outs, chunks, strict=True)), outs))
        return outs
    stages = [empty_on([n, *chunk_shape], ts[0].dtype, dev, pinned=cuda) for dev in devices]
    _copy.copy_all([(stages[j][i], t.narrow(d, j * c, c)) for j in range(n) for i, t in enumerate(ts)])
    if outs is None:
        return [reduce_stacked(s, o) for s in stages]
    for s, x in zip(stages, outs, strict=True):
        reduce_stacked(s, o, out=x)
    return outs


# ----- prepared ---------------------------------------------------------------------------------------
def bind_reduce(ts: list[torch.Tensor], out: torch.Tensor, op: ReduceOp) -> _kernels.Run:
    """:func:`_reduce_to` into a checked ``out`` with its route decided once (:func:`bind_one_device`)."""
    bound = bind_one_device(ts, out, op)
    if bound is not None:
        return bound
    return functools.partial(_reduce_to, ts, out.device, op, out)


def bind_all_reduce(ts: list[torch.Tensor], outs: list[torch.Tensor], op: ReduceOp) -> _kernels.Run:
    """:func:`_all_reduce_checked` into checked ``outs`` (which may be ``ts``) with its route decided once."""
    if _nccl.usable(ts + outs, distinct=ts, op=op):
        return functools.partial(_nccl.all_reduce, ts, outs, op)
    bound = bind_one_device(ts, outs[0], op, rest=outs[1:])
    if bound is not None:
        return bound
    return functools.partial(_all_reduce_checked, ts, op, outs, [t.device for t in ts])


def bind_one_device(ts: list[torch.Tensor], out: torch.Tensor, op: ReduceOp,
                    rest: list[torch.Tensor] | None = None, *, timer: _reduce.Timer | None = None
                    ) -> _kernels.Run | None:
    """A prepared reduction of checked tensors that all share one device (``rest``: all_reduce's other outputs,
    which then receive copies of ``out``): stacked or chained by the plain calls' rule
    (:func:`gpucomm.comm._reduce.stacks`), or, where the faster one depends on the machine
    (:func:`gpucomm.comm._reduce.times_routes`), whichever of the two ran faster here when timed on scratch copies
    of the tensors (``timer``: :func:`gpucomm.comm._reduce.wall_timer` of their device by default).  None when the
    tensors are spread over devices, not strided, need autograd, or alias in a way the bound strategies do not
    take: the caller binds the general kernel."""
    first = ts[0]
    if not _one_device_bindable(ts, out, rest):
        return None
    if _reduce.times_routes(first):
        return _bind_faster(ts, out, op, rest, timer or _reduce.wall_timer(first.device))
    if _reduce.stacks("reduce" if rest is None else "all_reduce", first.nbytes):
        return _bind_stacked(ts, out, op, rest)
    return _bind_chained(ts, out, op, rest)


def _bind_faster(ts: list[torch.Tensor], out: torch.Tensor, op: ReduceOp, rest: list[torch.Tensor] | None,
                 timer: _reduce.Timer) -> _kernels.Run | None:
    """Both strategies bound on clones of the tensors (``out`` and ``rest`` clone the input they are, so the
    clones alias as the tensors do: the user's memory is never written), timed (:func:`gpucomm.comm._reduce.faster`,
    the plain rule's choice listed first), and the faster bound on the tensors themselves.  Where the clones do
    not fit in the device's memory, the plain rule's choice, untimed."""
    binders = {"stacked": _bind_stacked, "chained": _bind_chained}
    if not _reduce.stacks("reduce" if rest is None else "all_reduce", ts[0].nbytes):
        binders = {"chained": _bind_chained, "stacked": _bind_stacked}
    try:
        best = _timed_best(ts, out, op, rest, timer, binders)
    except torch.cuda.OutOfMemoryError:
        best = next(iter(binders))
    if best is None:
        return None
    return binders[best](ts, out, op, rest)


def _timed_best(ts: list[torch.Tensor], out: torch.Tensor, op: ReduceOp, rest: list[torch.Tensor] | None,
                timer: _reduce.Timer, binders: dict) -> str | None:
    """The name of the faster of ``binders`` on clones of the tensors (:func:`_bind_faster`); None: neither binds.
    The clones and the scratch stack are freed on return, before the real strategy allocates."""
    clones = {id(t): t.clone() for t in ts}
    twins = [clones[id(t)] if id(t) in clones else t.clone() for t in (out, *(rest or ()))]
    scratch = ([clones[id(t)] for t in ts], twins[0], None if rest is None else twins[1:])
    runs = {name: run for name, bind in binders.items() if (run := bind(*scratch[:2], op, scratch[2])) is not None}
    if not runs:
        return None
    return _reduce.faster(runs, timer) if len(runs) > 1 else next(iter(runs))


def bind_stacked(ts: list[torch.Tensor], out: torch.Tensor, op: ReduceOp,
                 rest: list[torch.Tensor] | None = None) -> _kernels.Run | None:
    """Stack-then-reduce into a scratch buffer allocated once, when everything shares one device and the inputs
    are small enough to stack (all_reduce's limit when ``rest`` is given, reduce's otherwise:
    :func:`gpucomm.comm._reduce.stacks`); None otherwise (also for the cases :func:`bind_one_device` refuses)."""
    if not _reduce.stacks("reduce" if rest is None else "all_reduce", ts[0].nbytes):
        return None
    if not _one_device_bindable(ts, out, rest):
        return None
    return _bind_stacked(ts, out, op, rest)


def _one_device_bindable(ts: list[torch.Tensor], out: torch.Tensor, rest: list[torch.Tensor] | None) -> bool:
    """Whether :func:`bind_one_device` may bind these: n >= 2 strided tensors on one device that need no autograd,
    ``rest`` sharing no memory with ``out``."""
    group = [*ts, out, *(rest or [])]
    return not (len(ts) < 2 or any(t.layout != torch.strided for t in group) or not _kernels.one_device(group, ts[0])
                or any(t.requires_grad for t in group) and torch.is_grad_enabled()
                or rest and _copy.any_overlap(rest, [out]))


def _bind_stacked(ts: list[torch.Tensor], out: torch.Tensor, op: ReduceOp,
                  rest: list[torch.Tensor] | None) -> _kernels.Run:
    """:func:`gpucomm.comm._reduce.combine`'s stacked strategy (two kernels whatever n is), without its per-call
    allocation; ``rest`` (all-reduce) then receives copies of ``out``.  Outputs may be inputs (the stack reads
    every input before anything is written)."""
    first = ts[0]
    scratch = torch.empty((len(ts), *first.shape), dtype=first.dtype, device=first.device)
    copies = _kernels.bind_copies(rest, [out] * len(rest)) if rest else None
    stack = torch.stack

    def run() -> None:
        stack(ts, out=scratch)  # the stack snapshots the inputs: out may be one of them
        reduce_stacked(scratch, op, out)
        if copies is not None:
            copies()

    return run


def _bind_chained(ts: list[torch.Tensor], out: torch.Tensor, op: ReduceOp,
                  rest: list[torch.Tensor] | None) -> _kernels.Run | None:
    """:func:`gpucomm.comm._reduce.bind_chain` into ``out`` (n - 1 kernels, torch.cuda.comm.reduce_add's), then
    ``rest`` (all-reduce) receives copies of ``out``; None where the chain cannot be bound (``avg``, an ``out``
    that partly overlaps an input)."""
    chain = _reduce.bind_chain(ts, op, out)
    if chain is None or not rest:
        return chain
    return functools.partial(_then, chain, _kernels.bind_copies(rest, [out] * len(rest)))


def _then(first: _kernels.Run, second: _kernels.Run) -> None:
    first()
    second()


def bind_reduce_scatter(ts: list[torch.Tensor], outs: list[torch.Tensor], op: ReduceOp,
                        dim: int = 0) -> _kernels.Run:
    return functools.partial(_reduce_scatter_checked, ts, dim, op, list(outs[0].shape), [t.device for t in ts], outs)


@prepared_form("reduce_add")
def _prepared_reduce_add(inputs, outputs, destination=None, root=None):
    ts, dest = check_reduce_add(inputs, destination if root is None else root)
    if len(ts) == 1:  # reduce_add returns a single input itself
        if outputs is not None:
            raise fail_value("outputs", "None for a single input (reduce_add returns the input itself)",
                             "a tensor", "omit outputs=")
        return _kernels.noop, ts[0], [ts[0]]
    if outputs is None:
        out = torch.empty_like(next(t for t in ts if t.device == dest))
    else:
        _, _, _, out = check_reduce(ts, destination if root is None else root, "sum", outputs)
    return bind_reduce(ts, out, ReduceOp.SUM), out, [out]


@prepared_form("reduce")
def _prepared_reduce(inputs, outputs, destination=None, op="sum", root=None):
    ts, dest, o, out = check_reduce(inputs, destination if root is None else root, op, outputs)
    if out is None:
        out = empty_on(ts[0].shape, ts[0].dtype, dest, pinned=any(t.is_cuda for t in ts))
    return bind_reduce(ts, out, o), out, [out]


@prepared_form("all_reduce")
def _prepared_all_reduce(inputs, outputs, op="sum"):
    ts, o, outs, _ = check_all_reduce(inputs, op, outputs)
    if outs is None:
        outs = [torch.empty_like(t) for t in ts]
    return bind_all_reduce(ts, outs, o), outs, outs


@prepared_form("reduce_scatter")
def _prepared_reduce_scatter(inputs, outputs, dim=0, op="sum"):
    ts, d, o, chunk_shape, _, outs = check_reduce_scatter(inputs, dim, op, outputs)
    if outs is None:
        outs = [torch.empty(chunk_shape, dtype=t.dtype, device=t.device) for t in ts]
    return bind_reduce_scatter(ts, outs, o, d), outs, outs


@_kernels.local_form("reduce")
def _local_reduce(held, inputs, outputs, root, op, extra):
    out = outputs[root]
    if not _lean_reduce(inputs, op, out, held.one_device):  # the named checks, without a second one-pass try
        _reduce_to(*check_reduce(inputs, None, op, out))


@_kernels.local_form("all_reduce")
def _local_all_reduce(held, inputs, outputs, root, op, extra):
    if _lean_all_reduce(inputs, op, outputs, held.one_device) is None:
        ts, o, outs, devices = check_all_reduce(inputs, op, outputs)
        _all_reduce_checked(ts, o, outs, devices)


@_kernels.local_form("reduce_scatter")
def _local_reduce_scatter(held, inputs, outputs, root, op, extra):
    if _lean_reduce_scatter(inputs, 0, op, outputs, held.one_device) is None:
        ts, d, o, chunk_shape, devices, outs = check_reduce_scatter(inputs, 0, op, outputs)
        _reduce_scatter_checked(ts, d, o, chunk_shape, devices, outs)
