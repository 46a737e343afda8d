"""LocalCommunicator: the Communicator over the devices of one process, on :mod:`gpucomm.comm`.

This process holds every participant, so every list argument has one tensor per device, rank is
0 and world size is 1.  Devices may repeat (``["cpu", "cpu"]``, ``[cuda:0, cuda:0]``): each entry is
a participant of its own, which is how CPU-only and single-GPU machines exercise n-way code.

.. note:: ``barrier`` returns at once: every participant lives in this process, so all of them have
   reached it when it is called.  ``synchronize`` waits for every CUDA device in the list.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import SimpleNamespace

import torch

from gpucomm import collectives as _spec
from gpucomm.collectives import ReduceOp, parse_op
from gpucomm.communicator import (
    Communicator,
    OptionalTensors,
    Tensors,
    _check_avg_dtype,
    _check_held,
    _check_root,
    _check_shape,
    _check_splits,
)
from gpucomm.devices import DeviceLike, parse_devices

__all__ = ["LocalCommunicator"]

_ALL_GATHER, _REDUCE_SCATTER = _spec.get("all_gather"), _spec.get("reduce_scatter")
_SCATTER, _GATHER = _spec.get("scatter"), _spec.get("gather")


def _comm():
    from gpucomm import comm  # imported on first use: comm is the heavier module

    return comm


# torch.cuda.comm's own C++ loops (CUDA builds only; gather is left to gpucomm.comm, whose one-kernel
# cat on a repeated device beat torch's per-input copies: 0.80x vs 0.64x of torch at < 1 MiB).  When every tensor is a CUDA tensor of one dtype
# and no output shares memory with an input, gpucomm.comm would issue exactly the copies these issue;
# calling them straight from here, after this class's checks, saves a second round of Python checks
# per call, which on small messages is most of the cost (docs/performance.md §8.3).
_BROADCAST_OUT = getattr(torch._C, "_broadcast_out", None)
_SCATTER_OUT = getattr(torch._C, "_scatter_out", None)


def _plain_cuda(outs: Sequence[torch.Tensor], ins: Sequence[torch.Tensor]) -> bool:
    """Every tensor on CUDA, one dtype, strided, and no output in the same storage as an input."""
    from gpucomm.comm._copy import any_overlap

    dtype = ins[0].dtype
    return (all(t.is_cuda and t.dtype == dtype and t.layout == torch.strided for t in (*outs, *ins))
            and not any_overlap(outs, ins))


_TENSOR = torch.Tensor
_STRIDED = torch.strided


def _internals():
    """gpucomm.comm's unchecked steps, imported on first use (comm is the heavier module)."""
    global _INTERNALS
    if _INTERNALS is None:
        from gpucomm.comm import _broadcast, _checks, _copy, _exchange, _reduce, _reductions, _scatter_gather

        _INTERNALS = SimpleNamespace(
            broadcast_into=_broadcast._into, gather_into=_scatter_gather._gather_into,
            reduce_to=_reductions._reduce_to, all_reduce=_reductions._all_reduce_checked,
            reduce_scatter=_reductions._reduce_scatter_checked, all_gather=_exchange._all_gather_checked,
            send_recv=_exchange._send_recv_checked, all_to_all=_exchange._all_to_all_copies, check_op_dtype=_reduce.check_op_dtype,
            dense_like=_checks.dense_like, copy_all=_copy.copy_all, protect=_copy.protect)
    return _INTERNALS


_INTERNALS = None


def _alike(ts: list[torch.Tensor], shape, dtype: torch.dtype) -> bool:
    """gpucomm.comm's ``dense_like(ts, shape, dtype)``: every tensor strided with that shape and dtype."""
    return all(t.shape == shape and t.dtype is dtype and t.layout is _STRIDED for t in ts)


def _avg_ok(op: ReduceOp, t: torch.Tensor) -> None:
    """:func:`_check_avg_dtype` for a parsed op, its passing case decided here without a call."""
    if op is ReduceOp.AVG and not (t.is_floating_point() or t.is_complex()):
        _check_avg_dtype(op, t)


def _uniform(ins: list[torch.Tensor], outs: list[torch.Tensor]) -> bool:
    """Every input and output strided with ``ins[0]``'s shape and dtype (one pass, no error paths)."""
    first = ins[0]
    shape, dtype = first.shape, first.dtype
    return (all(t.shape == shape and t.dtype is dtype and t.layout is _STRIDED for t in ins)
            and all(t.shape == shape and t.dtype is dtype and t.layout is _STRIDED for t in outs))


class LocalCommunicator(Communicator):
    """The Communicator on the devices of this process: one participant per listed device.

    Args:
        devices: the participants' devices, e.g. ``[0, 1]``, ``["cuda:0", "cuda:0"]``, ``["cpu"] * 4``.

    Raises:
        ValueError, TypeError: an empty list or an entry that is not a device.
    """

    def __init__(self, devices: Sequence[DeviceLike]):
        parsed = parse_devices(devices)
        if not parsed:
            raise ValueError("devices: expected at least one device, but got an empty sequence; "
                             "pass e.g. ['cpu', 'cpu'] or [0, 1]")
        self._devices = parsed
        self._n = len(parsed)
        # gpucomm.comm accepts tensors on 'cpu' and 'cuda' only; the fast paths below skip its device
        # check, so they are taken only when every participant's device is one of those.
        # With every CUDA device indexed (as parse_devices gives them when CUDA is available), a tensor
        # that passes _check_held sits on exactly its participant's device, as gpucomm.comm checks.
        self._usable = all(d.type == "cpu" and d.index is None or d.type == "cuda" and d.index is not None
                           for d in parsed)
        self._one_device = parsed.count(parsed[0]) == len(parsed)

    def __repr__(self) -> str:
        return f"LocalCommunicator(devices={[str(d) for d in self._devices]})"

    # ----- who participates -------------------------------------------------------------------------
    @property
    def n(self) -> int:
        return self._n

    @property
    def rank(self) -> int:
        return 0

    @property
    def world_size(self) -> int:
        return 1

    @property
    def devices(self) -> list[torch.device]:
        return list(self._devices)

    def _held(self, tensors, arg: str) -> list:
        """:func:`_check_held` (same result, same errors), with its common case checked here in one pass.

        The common case: a list or tuple of exactly ``n`` plain tensors, each on its participant's
        device.  Anything else goes to :func:`_check_held`, which names the culprit.
        """
        if ((type(tensors) is list or type(tensors) is tuple) and len(tensors) == self._n
                and all(type(t) is _TENSOR and t.device == d for t, d in zip(tensors, self._devices))):  # noqa: B905
            return list(tensors)
        return _check_held(self, tensors, arg)

    def _held_optional(self, tensors, arg: str) -> list:
        """``_check_held(..., optional=True)``, its common case (entries may be None) checked here."""
        if ((type(tensors) is list or type(tensors) is tuple) and len(tensors) == self._n
                and all(t is None or (type(t) is _TENSOR and t.device == d)
                        for t, d in zip(tensors, self._devices))):  # noqa: B905
            return list(tensors)
        return _check_held(self, tensors, arg, optional=True)

    def _root(self, root: int) -> int:
        if type(root) is int and 0 <= root < self._n:
            return root
        return _check_root(self, root)

    # ----- collectives ------------------------------------------------------------------------------
    def broadcast(self, tensors: Tensors, root: int = 0) -> None:
        ts = self._held(tensors, "tensors")
        src = ts.pop(self._root(root))
        if not ts:
            return
        shape, layout = src.shape, src.layout
        if all(o.shape == shape and o.layout is layout for o in ts):
            if _BROADCAST_OUT is not None and _plain_cuda(ts, [src]):
                _BROADCAST_OUT(src, ts)
                return
            if self._usable:  # everything gpucomm.comm.broadcast checks holds: its copy step
                _internals().broadcast_into(src, ts)
                return
        _comm().broadcast(src, out=ts)

    def reduce(self, tensors: Tensors, root: int = 0, op: str | ReduceOp = "sum") -> None:
        ts = self._held(tensors, "tensors")
        o = parse_op(op)
        _avg_ok(o, ts[0])
        dst = ts[self._root(root)]
        if self._usable:
            k, first = _internals(), ts[0]
            if _alike(ts, first.shape, first.dtype):  # gpucomm.comm.reduce's checks, in one pass
                k.check_op_dtype(o, first.dtype, "reduce")
                k.reduce_to(ts, dst.device, o, dst)
                return
        _comm().reduce(ts, None, o, out=dst)

    def all_reduce(self, tensors: Tensors, op: str | ReduceOp = "sum") -> None:
        ts = self._held(tensors, "tensors")
        o = parse_op(op)
        _avg_ok(o, ts[0])
        if self._usable:
            k, first = _internals(), ts[0]
            if _alike(ts, first.shape, first.dtype):  # gpucomm.comm.all_reduce's checks, in one pass
                k.check_op_dtype(o, first.dtype, "all_reduce")
                k.all_reduce(ts, o, ts, [t.device for t in ts])
                return
        _comm().all_reduce(ts, o, out=ts)

    def all_gather(self, outputs: Tensors, inputs: Tensors) -> None:
        outs, ins = self._held(outputs, "outputs"), self._held(inputs, "inputs")
        want = _ALL_GATHER.output_shape(ins[0].shape, self._n)
        if not all(tuple(o.shape) == want for o in outs):
            for i, o in enumerate(outs):
                _check_shape(f"outputs[{i}]", o, want, f"n={self._n} inputs of shape {list(ins[0].shape)} "
                                                       f"concatenated along dim 0")
        if self._usable:
            k, first = _internals(), ins[0]
            if _alike(ins, first.shape, first.dtype) and _alike(outs, want, first.dtype):
                # Everything gpucomm.comm.all_gather(out=) checks holds: equal dense inputs of one dtype,
                # dense outputs of the concatenated shape and that dtype, each on its participant's device.
                k.all_gather(ins, 0, list(want), [t.device for t in ins], outs)
                return
        _comm().all_gather(ins, 0, out=outs)

    def reduce_scatter(self, outputs: Tensors, inputs: Tensors, op: str | ReduceOp = "sum") -> None:
        outs, ins = self._held(outputs, "outputs"), self._held(inputs, "inputs")
        o = parse_op(op)
        _avg_ok(o, ins[0])
        want = _REDUCE_SCATTER.output_shape(ins[0].shape, self._n)
        if not all(tuple(x.shape) == want for x in outs):
            for i, x in enumerate(outs):
                _check_shape(f"outputs[{i}]", x, want,
                             f"chunk of {self._n} of an input of shape {list(ins[0].shape)}")
        if self._usable:
            k, first = _internals(), ins[0]
            if _alike(ins, first.shape, first.dtype) and _alike(outs, want, first.dtype):
                # Everything gpucomm.comm.reduce_scatter(out=) checks holds (the split divides: want
                # was computed above); its op check, then its work.
                k.check_op_dtype(o, first.dtype, "reduce_scatter")
                k.reduce_scatter(ins, 0, o, list(want), [t.device for t in ins], outs)
                return
        _comm().reduce_scatter(ins, 0, o, out=outs)

    def scatter(self, outputs: Tensors, inputs: OptionalTensors, root: int = 0) -> None:
        outs = self._held(outputs, "outputs")
        src = self._held_optional(inputs, "inputs")[self._root(root)]
        if src is None:
            raise TypeError(f"inputs[{root}]: expected the root's tensor, but got None")
        n = self._n
        want = _SCATTER.output_shape(src.shape, n)
        if not all(tuple(o.shape) == want for o in outs):
            for i, o in enumerate(outs):
                _check_shape(f"outputs[{i}]", o, want, f"chunk of {n} of the root's input of shape "
                                                       f"{list(src.shape)}")
        if _SCATTER_OUT is not None and _plain_cuda(outs, [src]):
            _SCATTER_OUT(src, outs, 0, None)
            return
        if (self._usable and src.dim() and src.shape[0] == n * want[0] and src.layout is _STRIDED
                and all(o.layout is _STRIDED for o in outs)):
            # Everything gpucomm.comm.scatter(out=) checks holds (dense, n equal chunks summing to the
            # source, no streams): its copy step, aliasing protected as there.
            k = _internals()
            k.copy_all(k.protect(list(zip(outs, src.split(want[0]), strict=True)), outs))
            return
        _comm().scatter(src, out=outs)

    def gather(self, outputs: OptionalTensors, inputs: Tensors, root: int = 0) -> None:
        ins = self._held(inputs, "inputs")
        dst = self._held_optional(outputs, "outputs")[self._root(root)]
        if dst is None:
            raise TypeError(f"outputs[{root}]: expected the root's tensor, but got None")
        first = ins[0]
        shape, got = first.shape, dst.shape
        if not (shape and got and got[0] == shape[0] * self._n and got[1:] == shape[1:]):
            _check_shape(f"outputs[{root}]", dst, _GATHER.output_shape(shape, self._n),
                         f"n={self._n} inputs of shape {list(shape)} concatenated along dim 0")
        if (self._usable and dst.layout is _STRIDED
                and all(t.shape == shape and t.layout is _STRIDED for t in ins)):
            # Everything gpucomm.comm.gather(out=) checks holds (dense, equal shapes, out's shape): its
            # concatenation step (one torch.cat when every input sits on out's device).
            _internals().gather_into(ins, dst, 0, fresh=False)
            return
        _comm().gather(ins, 0, out=dst)

    def all_to_all(self, outputs: Tensors, inputs: Tensors) -> None:
        outs, ins = self._held(outputs, "outputs"), self._held(inputs, "inputs")
        n = self._n
        for i, (o, t) in enumerate(zip(outs, ins, strict=True)):
            _check_splits(f"inputs[{i}]", t, n)
            _check_shape(f"outputs[{i}]", o, tuple(t.shape), f"inputs[{i}]'s shape")
        if self._usable and _uniform(ins, outs):
            # One shape, dtype and layout everywhere: every piece out[j][i] <- inputs[i][j] matches, as
            # gpucomm.comm.all_to_all checks; its copies (aliasing protected), without its checks.
            srcs = [t.chunk(n) for t in ins]  # srcs[i][j]: input i, chunk j
            dsts = [list(o.chunk(n)) for o in outs]
            one = self._one_device
            _internals().all_to_all([x for row in dsts for x in row],
                                    [srcs[i][j] for j in range(n) for i in range(n)], one, {ins[0].dtype})
            return
        lists = [list(t.chunk(n)) for t in ins]  # lists[i][j]: input i, chunk j
        _comm().all_to_all(lists, out=[list(o.chunk(n)) for o in outs])

    def send_recv(self, outputs: Tensors, inputs: Tensors) -> None:
        outs, ins = self._held(outputs, "outputs"), self._held(inputs, "inputs")
        if not all(o.shape == t.shape for o, t in zip(outs, ins)):  # noqa: B905 — both hold n
            for i, (o, t) in enumerate(zip(outs, ins, strict=True)):
                _check_shape(f"outputs[{i}]", o, tuple(t.shape), f"inputs[{i}]'s shape")
        if self._usable:
            if _uniform(ins, outs):
                # One shape and dtype everywhere: out[i] is shaped like inputs[i-1], as
                # gpucomm.comm.send_recv checks; its copies, aliasing protected.
                _internals().send_recv(ins, outs)
                return
        _comm().send_recv(ins, out=outs)

    # ----- synchronisation ----------------------------------------------------------------------------
    def barrier(self) -> None:
        return None

    def synchronize(self) -> None:
        for d in dict.fromkeys(d for d in self._devices if d.type == "cuda"):
            torch.cuda.synchronize(d)
