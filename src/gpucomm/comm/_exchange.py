"""The exchanges without a root or a reduction: ``all_gather``, ``all_to_all`` and ``send_recv``."""

from __future__ import annotations

import functools
import math
import operator
from typing import Any

import torch

from gpucomm._validate import check_same_dtype, describe, fail_type, fail_value
from gpucomm.comm import _copy, _kernels, _nccl
from gpucomm.comm._alloc import empty_like_on, empty_on, replicate
from gpucomm.comm._checks import (
    DEVICE_OF,
    DTYPE_OF,
    LAYOUT_OF,
    SHAPE_OF,
    TORCH_REFUSALS,
    cat_shape,
    check_cat_shapes,
    check_dim,
    check_disjoint,
    check_outputs,
    check_tensors,
    dense_like,
    needs_grad,
    one_device,
)
from gpucomm.comm._prepare import prepared_form

__all__ = ["all_gather", "bind_all_gather", "bind_all_to_all", "bind_send_recv", "all_to_all", "all_to_all_outputs", "check_all_gather", "check_all_to_all", "check_all_to_all_out",
           "check_send_recv", "check_send_recv_out", "send_recv", "send_recv_outputs"]


def _dense(ts: list[torch.Tensor], arg: str) -> None:
    if set(map(LAYOUT_OF, ts)) == {torch.strided}:
        return
    for i, t in enumerate(ts):
        if t.layout != torch.strided:
            raise fail_value(f"{arg}[{i}]", "a dense (strided) tensor", describe(t), "convert it with .to_dense()")


def _check_out(o: torch.Tensor, arg: str, shape: list[int], dtype: torch.dtype, device: torch.device) -> None:
    if o.dtype == dtype and o.device == device and o.layout == torch.strided and list(o.shape) == shape:
        return  # the common case, in one test
    if list(o.shape) != shape:
        raise fail_value(arg, f"shape {shape}", f"shape {list(o.shape)}")
    if o.dtype != dtype:
        raise fail_value(arg, f"dtype {dtype}", f"dtype {o.dtype}")
    if o.device != device:
        raise fail_value(arg, f"a tensor on {device}", describe(o), f"allocate it on {device}")
    if o.layout != torch.strided:
        raise fail_value(arg, "a dense (strided) tensor", describe(o))


def all_gather(tensors: Any, dim: int = 0, *, out: Any = None) -> list[torch.Tensor]:
    """Concatenate ``tensors`` along ``dim`` on every participant's device.

    Semantics:
        * Output i equals ``torch.cat(tensors, dim)`` and sits on ``tensors[i].device``.  Inputs share
          dtype and every dim but ``dim`` (sizes along ``dim`` may differ).
        * ``out`` supplies the outputs; input i may be the i-th chunk of ``out[i]`` (NCCL's in-place
          layout).
        * NCCL all-gather when every input has the same shape, all are dense, contiguous, on distinct
          GPUs and the concatenation is a flat one (``dim`` 0, or every dim before it of size 1);
          otherwise every input is copied into every output, all copies at once.

    Returns:
        ``list[Tensor]``: n equal tensors (or ``out``).
    """
    done = _lean_all_gather(tensors, dim, out, None)
    if done is not None:
        return done
    ts, d, shape, devices, outs = check_all_gather(tensors, dim, out)
    return _all_gather_checked(ts, d, shape, devices, outs)


def _lean_all_gather(ts: Any, dim: Any, out: Any, devices: list[torch.device] | None) -> list[torch.Tensor] | None:
    """``all_gather(ts, dim, out=out)`` on one device (``devices``: the inputs', when the caller knows them), in
    one pass: one ``torch.cat`` into the first output and copies of it into the others.  The outputs, or None
    when nothing was written (then :func:`check_all_gather` decides).

    ``torch.cat(out=)`` refuses before writing what it checks (see ``_scatter_gather._lean_gather``); asked
    here is what it does not: one dtype among the inputs (it would promote), the outputs' shape (it resizes),
    dtype, device and storages (the copies would race, or read an input being overwritten), autograd (the
    copies would write some outputs before refusing one).
    """
    try:
        if not ((type(ts) is list or type(ts) is tuple) and ts) or type(dim) is not int:
            return None
        first = ts[0]
        dtype = first.dtype
        cat = cat_shape(list(map(SHAPE_OF, ts)), dim)
        if cat is None or set(map(DTYPE_OF, ts)) != {dtype}:
            return None
        d, shape = cat
        devices = devices or one_device(ts)
        n = len(ts)
        if devices is None:
            return None
        if out is None:
            if needs_grad(*ts):
                return None  # the general route: torch.cat records autograd there
            result = torch.cat(ts, d)
            if result.layout is not torch.strided:
                return None  # sparse inputs: the named checks refuse them (nothing was written)
            return [result, *replicate(result, n - 1)]
        if not ((type(out) is list or type(out) is tuple) and len(out) == n and set(map(SHAPE_OF, out)) == {shape}
                and set(map(DTYPE_OF, out)) == {dtype} and list(map(DEVICE_OF, out)) == devices
                and _kernels.unshared(out[0], [*out[1:], *ts]) and not needs_grad(*ts, *out)):
            return None
        torch.cat(ts, d, out=out[0])
        if n > 1:
            _copy.copy_many(out[1:], [out[0]] * (n - 1))  # one device: local copies, one call
        return list(out)
    except TORCH_REFUSALS:
        return None


def check_all_gather(tensors: Any, dim: Any, out: Any) -> tuple:
    """:func:`all_gather`'s checks: the arguments of :func:`_all_gather_checked`."""
    ts = check_tensors(tensors, "tensors")
    _dense(ts, "tensors")
    check_same_dtype(ts, "tensors")
    d = check_dim(dim, ts[0].dim(), what="tensors[0]")
    shape = check_cat_shapes(ts, d, "tensors")
    devices = [t.device for t in ts]
    outs = None
    if out is not None:
        outs = check_outputs(out, len(ts))
        if not dense_like(outs, shape, ts[0].dtype, devices):
            for i, o in enumerate(outs):  # name the culprit
                _check_out(o, f"out[{i}]", shape, ts[0].dtype, devices[i])
        check_disjoint(outs, same_value=True)
        _no_grad_out(outs, ts)
    return ts, d, shape, devices, outs


_REQUIRES_GRAD = operator.attrgetter("requires_grad")


def _no_grad_out(outs: list[torch.Tensor], ts: list[torch.Tensor]) -> None:
    """torch's ``cat(out=)`` refuses tensors that need grad, after writing some outputs: refuse first."""
    if torch.is_grad_enabled() and (any(map(_REQUIRES_GRAD, ts)) or any(map(_REQUIRES_GRAD, outs))):
        arg, t = next(((f"out[{i}]", o) for i, o in enumerate(outs) if o.requires_grad), None) or next(
            (f"tensors[{i}]", t) for i, t in enumerate(ts) if t.requires_grad)
        raise fail_value(arg, "a tensor that does not require grad when out= is given (out= writes are not "
                         "differentiable)", describe(t) + " with requires_grad=True",
                         "detach it, run under torch.no_grad(), or omit out= to get new tensors")


def _all_gather_checked(ts: list[torch.Tensor], d: int, shape: list[int], devices: list[torch.device],
                        outs: list[torch.Tensor] | None) -> list[torch.Tensor]:
    """:func:`all_gather` after its checks (``shape``: the concatenated shape; ``devices``: the inputs')."""
    flat = math.prod(shape[:d]) == 1 and all(t.shape == ts[0].shape for t in ts)
    if flat and _nccl.usable(ts + (outs or []), distinct=ts):
        outs = outs or [torch.empty(shape, dtype=t.dtype, device=t.device) for t in ts]
        _nccl.all_gather(ts, outs)
        return outs
    cuda = any(t.is_cuda for t in ts)
    if devices.count(devices[0]) == len(devices):  # one device: one concatenation, then copies of it
        if outs is None:
            first = torch.cat(ts, d)
            return [first, *replicate(first, len(ts) - 1)]
        if not _copy.any_overlap(outs, ts):
            torch.cat(ts, d, out=outs[0])
            _copy.copy_many(outs[1:], [outs[0]] * (len(outs) - 1))  # one device: local copies, one call
            return outs
    if outs is None:
        outs = [empty_on(shape, ts[0].dtype, dev, pinned=cuda) for dev in devices]
        pairs = _cat_pairs(ts, outs, d)
    else:
        pairs = _copy.protect(_cat_pairs(ts, outs, d), outs)
    _copy.copy_all(pairs)
    return outs


def _cat_pairs(ts: list[torch.Tensor], outs: list[torch.Tensor], d: int) -> list[_copy.Pair]:
    pairs = []
    for o in outs:
        offset = 0
        for t in ts:
            pairs.append((o.narrow(d, offset, t.shape[d]), t))
            offset += t.shape[d]
    return pairs


def all_to_all(tensor_lists: Any, *, out: Any = None) -> list[list[torch.Tensor]]:
    """Personalised exchange: ``result[j][i] == tensor_lists[i][j]``, on participant j's device.

    Semantics:
        * ``tensor_lists[i]`` holds participant i's n outgoing tensors, all on its device;
          ``tensor_lists[i][j]`` goes to participant j, whose device is ``tensor_lists[j][0].device``.
          Pieces may differ in shape and dtype.
        * ``out[j][i]`` (same shape and dtype as ``tensor_lists[i][j]``, on participant j's device)
          receives the pieces; ``out`` may be ``tensor_lists`` itself (the pieces are snapshotted
          where needed).  Applying all_to_all twice gives back the input.

    Returns:
        ``list[list[Tensor]]``: new tensors (or ``out``).
    """
    lists, devices, one = check_all_to_all(tensor_lists)
    n = len(lists)
    if out is None and _uniform(lists, devices):  # one device, one shape: a single stacking kernel
        flat = torch.stack([lists[i][j] for j in range(n) for i in range(n)]).unbind(0)
        return [list(flat[j * n:(j + 1) * n]) for j in range(n)]
    if out is None:
        result = all_to_all_outputs(lists, devices)
        _copy.copy_all([(result[j][i], lists[i][j]) for j in range(n) for i in range(n)])
        return result
    result, dsts, srcs, dtypes = check_all_to_all_out(lists, devices, one, out)
    _all_to_all_copies(dsts, srcs, one, dtypes)
    return result


def all_to_all_outputs(lists: list[list[torch.Tensor]], devices: list[torch.device]) -> list[list[torch.Tensor]]:
    """New outputs for checked ``lists``: ``result[j][i]`` shaped like ``lists[i][j]``, on device j."""
    n = len(lists)
    cuda = any(row[0].is_cuda for row in lists)
    return [[empty_like_on(lists[i][j], devices[j], pinned=cuda) for i in range(n)] for j in range(n)]


def check_all_to_all(tensor_lists: Any) -> tuple[list[list[torch.Tensor]], list[torch.device], bool]:
    """:func:`all_to_all`'s input checks: ``(lists, devices, one)`` (``one``: a single device)."""
    lists, everything = _square(tensor_lists, "tensor_lists")
    n = len(lists)
    devices = [row[0].device for row in lists]
    one = devices.count(devices[0]) == n  # one device (a repeated list, or the CPU): checks in one pass
    if (set(map(LAYOUT_OF, everything)) != {torch.strided}
            or (set(map(DEVICE_OF, everything)) != {devices[0]} if one else
                any(set(map(DEVICE_OF, row)) != {dev} for row, dev in zip(lists, devices, strict=True)))):
        for i, row in enumerate(lists):  # name the culprit
            _dense(row, f"tensor_lists[{i}]")
            for j, t in enumerate(row):
                if t.device != devices[i]:
                    raise fail_value(f"tensor_lists[{i}][{j}]", f"a tensor on {devices[i]} (participant {i}'s "
                                     f"device, that of tensor_lists[{i}][0])", describe(t),
                                     "every tensor a participant sends must sit on its device")
    return lists, devices, one


def check_all_to_all_out(lists: list[list[torch.Tensor]], devices: list[torch.device], one: bool,
                         out: Any) -> tuple:
    """:func:`all_to_all`'s ``out`` checks: ``(out rows, dsts, srcs, dtypes)`` for :func:`_all_to_all_copies`."""
    n = len(lists)
    result, dsts = _square(out, "out", n)
    srcs = [lists[i][j] for j in range(n) for i in range(n)]  # in dsts' order: out[j][i] <- tensor_lists[i][j]
    dtypes = list(map(DTYPE_OF, srcs))
    if (list(map(SHAPE_OF, dsts)) != list(map(SHAPE_OF, srcs)) or list(map(DTYPE_OF, dsts)) != dtypes
            or set(map(LAYOUT_OF, dsts)) != {torch.strided}
            or (set(map(DEVICE_OF, dsts)) != {devices[0]} if one else
                list(map(DEVICE_OF, dsts)) != [d for d in devices for _ in range(n)])):
        for k, (o, src) in enumerate(zip(dsts, srcs, strict=True)):  # name the culprit
            _check_out(o, f"out[{k // n}][{k % n}]", list(src.shape), src.dtype, devices[k // n])
    pair = _copy.overlapping_pair(dsts)
    if pair is not None:  # every piece receives its own data: refused before any is written
        a, b = pair
        raise fail_value(f"out[{b // n}][{b % n}]", f"a tensor that does not overlap out[{a // n}][{a % n}] (every "
                         "piece receives its own data)", f"a tensor sharing memory with it ({describe(dsts[b])})",
                         "allocate a separate tensor for every piece")
    return result, dsts, srcs, set(dtypes)


def _all_to_all_copies(dsts: list[torch.Tensor], srcs: list[torch.Tensor], one: bool,
                       dtypes: set[torch.dtype]) -> None:
    """``dsts[k].copy_(srcs[k])`` for checked pieces (``one``: all on one device; ``dtypes``: theirs)."""
    if _copy.any_overlap(dsts, srcs):  # in place (out is tensor_lists) or partly: snapshot what is read
        _copy.copy_all(_copy.protect(list(zip(dsts, srcs, strict=True)), dsts))
    elif one:  # every copy is a local one, issued in one call
        _copy.copy_many(dsts, srcs, dtypes=dtypes)
    else:
        _copy.copy_all(list(zip(dsts, srcs, strict=True)))




def _uniform(lists: list[list[torch.Tensor]], devices: list[torch.device]) -> bool:
    first = lists[0][0]
    return devices.count(devices[0]) == len(devices) and all(
        t.shape == first.shape and t.dtype == first.dtype for row in lists for t in row)


def _square(x: Any, arg: str, n: int | None = None) -> tuple[list[list[torch.Tensor]], list[torch.Tensor]]:
    """The rows of an n x n list of tensors, and all its tensors row by row."""
    if type(x) is list or type(x) is tuple:  # the common case, checked in bulk
        k = len(x) if n is None else n
        rows = [list(r) for r in x if type(r) is list or type(r) is tuple]
        flat = [t for r in rows for t in r]
        if (k and len(rows) == len(x) == k and len(flat) == k * k and list(map(len, rows)) == [k] * k
                and set(map(type, flat)) == {torch.Tensor} and all(r[0].is_cuda or r[0].is_cpu for r in rows)):
            return rows, flat  # every other tensor's device is checked against its row's first by the callers
    rows = _square_checked(x, arg, n)
    return rows, [t for r in rows for t in r]


def _square_checked(x: Any, arg: str, n: int | None = None) -> list[list[torch.Tensor]]:
    if isinstance(x, torch.Tensor) or not isinstance(x, list | tuple):
        raise fail_type(arg, "a list of n lists of n tensors", x)
    rows = [check_tensors(row, f"{arg}[{i}]") for i, row in enumerate(x)]
    k = len(rows) if n is None else n
    if not rows:
        raise fail_value(arg, "at least one participant's list", "an empty sequence")
    if len(rows) != k:
        raise fail_value(arg, f"{k} lists (one per participant)", f"{len(rows)}")
    for i, row in enumerate(rows):
        if len(row) != k:
            raise fail_value(f"{arg}[{i}]", f"{k} tensors (one per participant)", f"{len(row)}",
                             "participant i sends exactly one tensor to every participant")
    return rows


def send_recv(tensors: Any, *, out: Any = None) -> list[torch.Tensor]:
    """Ring shift: result i is a copy of ``tensors[(i - 1) % n]``, on ``tensors[i].device``.

    Semantics:
        * Participant i sends its tensor to participant (i + 1) mod n; shapes and dtypes may differ.
        * ``out[i]`` (shaped like ``tensors[i-1]``, on ``tensors[i].device``) receives it; ``out``
          may be ``tensors`` itself.

    Returns:
        ``list[Tensor]``: new tensors (or ``out``).
    """
    ts = check_send_recv(tensors)
    n = len(ts)
    if out is None and _uniform([ts], [t.device for t in ts]):  # one device, one shape: one kernel
        return list(torch.stack([ts[i - 1] for i in range(n)]).unbind(0))
    if out is None:
        outs = send_recv_outputs(ts)
        _copy.copy_all([(outs[i], ts[i - 1]) for i in range(n)])
        return outs
    outs = check_send_recv_out(ts, out)
    _send_recv_checked(ts, outs)
    return outs


def check_send_recv(tensors: Any) -> list[torch.Tensor]:
    """:func:`send_recv`'s input checks."""
    ts = check_tensors(tensors, "tensors")
    _dense(ts, "tensors")
    return ts


def send_recv_outputs(ts: list[torch.Tensor]) -> list[torch.Tensor]:
    """New outputs for checked inputs: output i shaped like input i-1, on input i's device."""
    cuda = any(t.is_cuda for t in ts)
    return [empty_like_on(ts[i - 1], ts[i].device, pinned=cuda) for i in range(len(ts))]


def check_send_recv_out(ts: list[torch.Tensor], out: Any) -> list[torch.Tensor]:
    """:func:`send_recv`'s ``out`` checks."""
    outs = check_outputs(out, len(ts))
    for i, o in enumerate(outs):
        _check_out(o, f"out[{i}]", list(ts[i - 1].shape), ts[i - 1].dtype, ts[i].device)
    check_disjoint(outs)
    return outs


def _send_recv_checked(ts: list[torch.Tensor], outs: list[torch.Tensor]) -> None:
    """:func:`send_recv`'s copies into checked ``outs`` (which may alias ``ts``)."""
    n = len(ts)
    _copy.copy_all(_copy.protect([(outs[i], ts[i - 1]) for i in range(n)], outs))


# ----- prepared ---------------------------------------------------------------------------------------
def bind_all_gather(ts: list[torch.Tensor], outs: list[torch.Tensor], dim: int = 0) -> _kernels.Run:
    return functools.partial(_all_gather_checked, ts, dim, list(outs[0].shape), [t.device for t in ts], outs)


def bind_all_to_all(dsts: list[torch.Tensor], srcs: list[torch.Tensor]) -> _kernels.Run:
    one = len({t.device for t in (*dsts, *srcs)}) == 1
    return functools.partial(_all_to_all_copies, dsts, srcs, one, {t.dtype for t in srcs})


def bind_send_recv(ts: list[torch.Tensor], outs: list[torch.Tensor]) -> _kernels.Run:
    return functools.partial(_send_recv_checked, ts, outs)


@prepared_form("all_gather")
def _prepared_all_gather(inputs, outputs, dim=0):
    ts, d, shape, devices, outs = check_all_gather(inputs, dim, outputs)
    if outs is None:
        outs = [torch.empty(shape, dtype=ts[0].dtype, device=dev) for dev in devices]
    return bind_all_gather(ts, outs, d), outs, outs


@prepared_form("all_to_all")
def _prepared_all_to_all(inputs, outputs):
    lists, devices, one = check_all_to_all(inputs)
    if outputs is None:
        outputs = all_to_all_outputs(lists, devices)
    result, dsts, srcs, _ = check_all_to_all_out(lists, devices, one, outputs)
    return bind_all_to_all(dsts, srcs), result, dsts


@prepared_form("send_recv")
def _prepared_send_recv(inputs, outputs):
    ts = check_send_recv(inputs)
    outs = send_recv_outputs(ts) if outputs is None else check_send_recv_out(ts, outputs)
    return bind_send_recv(ts, outs), outs, outs


@_kernels.local_form("all_gather")
def _local_all_gather(held, inputs, outputs, root, op, extra):
    if _lean_all_gather(inputs, 0, outputs, held.one_device) is None:
        ts, d, shape, devices, outs = check_all_gather(inputs, 0, outputs)
        _all_gather_checked(ts, d, shape, devices, outs)


@_kernels.local_form("all_to_all")
def _local_all_to_all(held, inputs, outputs, root, op, extra):
    n = len(inputs)  # chunk j of participant i's buffer goes to participant j
    all_to_all([list(t.chunk(n)) for t in inputs], out=[list(t.chunk(n)) for t in outputs])


@_kernels.local_form("send_recv")
def _local_send_recv(held, inputs, outputs, root, op, extra):
    send_recv(inputs, out=outputs)
