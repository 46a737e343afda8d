"""LocalCommunicator: the Communicator over the devices of one process, on :mod:`gpucomm.comm`.

This process holds every participant, so every list argument has one tensor per device, rank is
0 and world size is 1.  Devices may repeat (``["cpu", "cpu"]``, ``[cuda:0, cuda:0]``): each entry is
a participant of its own, which is how CPU-only and single-GPU machines exercise n-way code.

Every collective is *plan, then run*: ``_plan_<op>`` makes this class's checks and returns the
kernel of :mod:`gpucomm.comm._kernels` (the seam: comm's unchecked kernels) with its arguments; a
plain call runs it at once, :meth:`~gpucomm.communicator.base.Communicator.prepare` binds it once.
When the fast checks here cannot vouch for everything comm would check (mixed dtypes or layouts,
odd devices), the plan is the public :mod:`gpucomm.comm` function instead, whose full checks name
the problem.

.. note:: ``barrier`` returns at once: every participant lives in this process, so all of them have
   reached it when it is called.  ``synchronize`` waits for every CUDA device in the list.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Sequence

import torch

from gpucomm import collectives as _spec
from gpucomm.collectives import ReduceOp, parse_op
from gpucomm.communicator.base import Communicator, OptionalTensors, Prepared, Tensors
from gpucomm.communicator.checks import check_avg_dtype, check_held, check_root, check_shape, check_splits
from gpucomm.devices import DeviceLike, parse_devices

__all__ = ["LocalCommunicator"]

_ALL_GATHER, _REDUCE_SCATTER = _spec.get("all_gather"), _spec.get("reduce_scatter")
_SCATTER, _GATHER = _spec.get("scatter"), _spec.get("gather")

_TENSOR = torch.Tensor
_STRIDED = torch.strided
_TENSOR_TYPES = {torch.Tensor}
_TENSOR_OR_NONE = {torch.Tensor, type(None)}
_GET_DEVICE = torch.Tensor.get_device  # an int (-1 on the CPU): cheaper than building a torch.device
_STORAGE = torch.Tensor.untyped_storage
_STORAGE_PTR = torch.UntypedStorage.data_ptr
_SHAPE = operator.attrgetter("shape")
# torch.cuda.comm's C++ loops (CUDA builds only): the plain broadcast and scatter call them directly.
_BROADCAST_OUT = getattr(torch._C, "_broadcast_out", None)
_SCATTER_OUT = getattr(torch._C, "_scatter_out", None)

# A plan: (run, bind, args).  run(*args) does the work now; bind(*args) returns a zero-argument
# callable that does it again and again (route decided once).
Plan = tuple[Callable[..., object], Callable[..., Prepared], tuple]


@functools.cache
def _k():
    """gpucomm.comm's kernels, imported on first use (comm is the heavier package)."""
    from gpucomm.comm import _kernels

    return _kernels


def _via_comm(name: str, first, **kwargs) -> Plan:
    """The public gpucomm.comm function (full checks, every odd case), plain or prepared."""
    from gpucomm import comm

    out = kwargs.pop("out")
    fn = getattr(comm, name)
    return (lambda: fn(first, out=out, **kwargs),
            lambda: comm.prepare(name, first, out, **kwargs), ())


_OPS = {o.value: o for o in ReduceOp}


def _op(op: str | ReduceOp) -> ReduceOp:
    """``parse_op(op)``, its common case (an exact name or a ReduceOp) answered by one dict lookup."""
    if type(op) is ReduceOp:
        return op
    hit = _OPS.get(op) if type(op) is str else None
    return hit if hit is not None else parse_op(op)


@functools.lru_cache(maxsize=512)
def _output_shape(name: str, shape: torch.Size, n: int) -> tuple[int, ...]:
    """The spec's ``output_shape(shape, n)`` for collective ``name``, remembered: the same buffers
    come back call after call.  Errors (a shape that does not split) are not cached."""
    return _spec.get(name).output_shape(shape, n)


@functools.lru_cache(maxsize=512)
def _scatter_shape(shape: torch.Size, n: int) -> torch.Size:
    """Each participant's chunk of a scatter of ``shape`` (n equal pieces of dim 0), remembered;
    ValueError (not cached) when it does not split."""
    return torch.Size(_output_shape("scatter", shape, n))


def _alike(ts: list[torch.Tensor], shape, dtype: torch.dtype) -> bool:
    """Every tensor strided with that shape and dtype (gpucomm.comm's ``dense_like``, inlined)."""
    return all(t.shape == shape and t.dtype is dtype and t.layout is _STRIDED for t in ts)


def _uniform(ins: list[torch.Tensor], outs: list[torch.Tensor]) -> bool:
    """Every input and output strided with ``ins[0]``'s shape and dtype (one pass, no error paths)."""
    first = ins[0]
    return _alike(ins, first.shape, first.dtype) and _alike(outs, first.shape, first.dtype)


def _reducible(o: ReduceOp, t: torch.Tensor) -> bool:
    """The op/dtype pairs the kernels take without comm's op checks (avg on integers raises here)."""
    if o is ReduceOp.AVG:
        check_avg_dtype(o, t)
    dtype = t.dtype
    return not (dtype in _k().UNREDUCIBLE or (dtype.is_complex and o in (ReduceOp.MAX, ReduceOp.MIN)))


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
        # The kernels take tensors on 'cpu' and indexed 'cuda' devices only (comm checks that; the
        # plans skip comm's checks), so they are used only when every participant's device is one.
        # With every CUDA device indexed, a tensor that passes _held sits on exactly its device.
        self._usable = all(d.type == "cpu" and d.index is None or d.type == "cuda" and d.index is not None
                           for d in parsed)
        # Every participant on an indexed GPU: plain broadcast and scatter may then hand the tensors to
        # torch's C++ loops after the few checks those loops do not make (see _direct).
        self._direct = (_BROADCAST_OUT is not None and _SCATTER_OUT is not None
                        and all(d.type == "cuda" and d.index is not None for d in parsed))
        self._indices = [-1 if d.index is None else d.index for d in parsed]

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
        """:func:`check_held` (same result, same errors), its common case checked here in one pass."""
        if ((type(tensors) is list or type(tensors) is tuple) and len(tensors) == self._n
                and all(type(t) is _TENSOR and t.device == d for t, d in zip(tensors, self._devices))):  # noqa: B905
            return list(tensors)
        return check_held(self, tensors, arg)

    def _held_optional(self, tensors, arg: str) -> list:
        """``check_held(..., optional=True)``, its common case (entries may be None) checked here."""
        if ((type(tensors) is list or type(tensors) is tuple) and len(tensors) == self._n
                and all(t is None or (type(t) is _TENSOR and t.device == d)
                        for t, d in zip(tensors, self._devices))):  # noqa: B905
            return list(tensors)
        return check_held(self, tensors, arg, optional=True)

    def _on_devices(self, tensors) -> bool:
        """Whether ``tensors`` is a list (or tuple) of n plain tensors, each on its participant's
        device: :meth:`_held`'s common case, in C-level passes.  False sends the caller to the full
        checks (which then name the problem)."""
        return ((type(tensors) is list or type(tensors) is tuple) and len(tensors) == self._n
                and set(map(type, tensors)) == _TENSOR_TYPES and list(map(_GET_DEVICE, tensors)) == self._indices)

    def _root(self, root: int) -> int:
        if type(root) is int and 0 <= root < self._n:
            return root
        return check_root(self, root)

    # ----- plans: this class's checks, then a kernel and its arguments ---------------------------------
    def _plan_broadcast(self, tensors: Tensors, root: int = 0) -> Plan:
        ts = self._held(tensors, "tensors")
        src = ts.pop(self._root(root))
        k = _k()
        if not ts:
            return k.noop, k.bind_noop, ()
        shape = src.shape
        if self._usable and src.layout is _STRIDED and all(o.shape == shape and o.layout is _STRIDED for o in ts):
            return k.broadcast, k.bind_broadcast, (src, ts)
        return _via_comm("broadcast", src, out=ts)

    def _plan_reduce(self, tensors: Tensors, root: int = 0, op: str | ReduceOp = "sum") -> Plan:
        ts = self._held(tensors, "tensors")
        o = _op(op)
        dst = ts[self._root(root)]
        first = ts[0]
        if self._usable and _reducible(o, first) and _alike(ts, first.shape, first.dtype):
            k = _k()
            return k.reduce, k.bind_reduce, (ts, dst, o)
        return _via_comm("reduce", ts, destination=None, op=o, out=dst)

    def _plan_all_reduce(self, tensors: Tensors, op: str | ReduceOp = "sum") -> Plan:
        ts = self._held(tensors, "tensors")
        o = _op(op)
        first = ts[0]
        if self._usable and _reducible(o, first) and _alike(ts, first.shape, first.dtype):
            k = _k()
            return k.all_reduce, k.bind_all_reduce, (ts, ts, o)
        return _via_comm("all_reduce", ts, op=o, out=ts)

    def _plan_all_gather(self, outputs: Tensors, inputs: Tensors) -> Plan:
        outs, ins = self._held(outputs, "outputs"), self._held(inputs, "inputs")
        want = _output_shape("all_gather", ins[0].shape, self._n)
        if not all(tuple(o.shape) == want for o in outs):
            for i, o in enumerate(outs):
                check_shape(f"outputs[{i}]", o, want, f"n={self._n} inputs of shape {list(ins[0].shape)} "
                                                      f"concatenated along dim 0")
        first = ins[0]
        if self._usable and _alike(ins, first.shape, first.dtype) and _alike(outs, want, first.dtype):
            k = _k()
            return k.all_gather, k.bind_all_gather, (ins, outs, 0)
        return _via_comm("all_gather", ins, dim=0, out=outs)

    def _plan_reduce_scatter(self, outputs: Tensors, inputs: Tensors, op: str | ReduceOp = "sum") -> Plan:
        outs, ins = self._held(outputs, "outputs"), self._held(inputs, "inputs")
        o = _op(op)
        want = _output_shape("reduce_scatter", ins[0].shape, self._n)
        if not all(tuple(x.shape) == want for x in outs):
            for i, x in enumerate(outs):
                check_shape(f"outputs[{i}]", x, want, f"chunk of {self._n} of an input of shape {list(ins[0].shape)}")
        first = ins[0]
        if (self._usable and _reducible(o, first) and _alike(ins, first.shape, first.dtype)
                and _alike(outs, want, first.dtype)):
            k = _k()
            return k.reduce_scatter, k.bind_reduce_scatter, (ins, outs, o, 0)
        return _via_comm("reduce_scatter", ins, dim=0, op=o, out=outs)

    def _plan_scatter(self, outputs: Tensors, inputs: OptionalTensors, root: int = 0) -> Plan:
        outs = self._held(outputs, "outputs")
        src = self._held_optional(inputs, "inputs")[self._root(root)]
        if src is None:
            raise TypeError(f"inputs[{root}]: expected the root's tensor, but got None")
        n = self._n
        want = _output_shape("scatter", src.shape, n)
        if not all(tuple(o.shape) == want for o in outs):
            for i, o in enumerate(outs):
                check_shape(f"outputs[{i}]", o, want, f"chunk of {n} of the root's input of shape {list(src.shape)}")
        if self._usable and src.layout is _STRIDED and all(o.layout is _STRIDED for o in outs):
            k = _k()  # n equal chunks that sum to the source (want says so): comm.scatter(out=)'s checks
            return k.scatter, k.bind_scatter, (src, outs, 0, None)
        return _via_comm("scatter", src, out=outs)

    def _plan_gather(self, outputs: OptionalTensors, inputs: Tensors, root: int = 0) -> Plan:
        ins = self._held(inputs, "inputs")
        dst = self._held_optional(outputs, "outputs")[self._root(root)]
        if dst is None:
            raise TypeError(f"outputs[{root}]: expected the root's tensor, but got None")
        shape, got = ins[0].shape, dst.shape
        if not (shape and got and got[0] == shape[0] * self._n and got[1:] == shape[1:]):
            check_shape(f"outputs[{root}]", dst, _GATHER.output_shape(shape, self._n),
                        f"n={self._n} inputs of shape {list(shape)} concatenated along dim 0")
        if (self._usable and dst.layout is _STRIDED and not (dst.requires_grad and torch.is_grad_enabled())
                and all(t.shape == shape and t.layout is _STRIDED for t in ins)):
            k = _k()
            return k.gather, k.bind_gather, (ins, dst, 0)
        return _via_comm("gather", ins, dim=0, out=dst)

    def _plan_all_to_all(self, outputs: Tensors, inputs: Tensors) -> Plan:
        outs, ins = self._held(outputs, "outputs"), self._held(inputs, "inputs")
        n = self._n
        for i, (o, t) in enumerate(zip(outs, ins, strict=True)):
            check_splits(f"inputs[{i}]", t, n)
            check_shape(f"outputs[{i}]", o, tuple(t.shape), f"inputs[{i}]'s shape")
        if self._usable and _uniform(ins, outs):
            # out[j] chunk i <- inputs[i] chunk j: every piece matches, as gpucomm.comm.all_to_all checks.
            srcs = [t.chunk(n) for t in ins]
            dsts = [x for o in outs for x in o.chunk(n)]
            k = _k()
            return k.all_to_all, k.bind_all_to_all, (dsts, [srcs[i][j] for j in range(n) for i in range(n)])
        lists = [list(t.chunk(n)) for t in ins]
        return _via_comm("all_to_all", lists, out=[list(o.chunk(n)) for o in outs])

    def _plan_send_recv(self, outputs: Tensors, inputs: Tensors) -> Plan:
        outs, ins = self._held(outputs, "outputs"), self._held(inputs, "inputs")
        if not all(o.shape == t.shape for o, t in zip(outs, ins)):  # noqa: B905 — both hold n
            for i, (o, t) in enumerate(zip(outs, ins, strict=True)):
                check_shape(f"outputs[{i}]", o, tuple(t.shape), f"inputs[{i}]'s shape")
        if self._usable and _uniform(ins, outs):
            k = _k()
            return k.send_recv, k.bind_send_recv, (ins, outs)
        return _via_comm("send_recv", ins, out=outs)

    # ----- collectives ------------------------------------------------------------------------------
    def broadcast(self, tensors: Tensors, root: int = 0) -> None:
        if self._direct and type(root) is int and 0 <= root < self._n and self._on_devices(tensors):
            outs = list(tensors)
            src = outs.pop(root)
            try:
                # An output in the source's storage (the source itself, a view, an overlap) takes the
                # planned route, which orders such copies; torch's copy_ would race on some of them.
                if outs and _STORAGE_PTR(_STORAGE(src)) not in set(map(_STORAGE_PTR, map(_STORAGE, outs))):
                    _BROADCAST_OUT(src, outs)  # checks every shape before its first copy
                    return
            except RuntimeError:
                pass  # a shape, layout or dtype torch's loop refuses: the plan below names it or handles it
        run, _, args = self._plan_broadcast(tensors, root)
        run(*args)

    def reduce(self, tensors: Tensors, root: int = 0, op: str | ReduceOp = "sum") -> None:
        run, _, args = self._plan_reduce(tensors, root, op)
        run(*args)

    def all_reduce(self, tensors: Tensors, op: str | ReduceOp = "sum") -> None:
        run, _, args = self._plan_all_reduce(tensors, op)
        run(*args)

    def all_gather(self, outputs: Tensors, inputs: Tensors) -> None:
        run, _, args = self._plan_all_gather(outputs, inputs)
        run(*args)

    def reduce_scatter(self, outputs: Tensors, inputs: Tensors, op: str | ReduceOp = "sum") -> None:
        run, _, args = self._plan_reduce_scatter(outputs, inputs, op)
        run(*args)

    def scatter(self, outputs: Tensors, inputs: OptionalTensors, root: int = 0) -> None:
        if (self._direct and type(root) is int and 0 <= root < self._n and self._on_devices(outputs)
                and self._inputs_on_devices(inputs)):
            src = inputs[root]
            try:
                # n equal chunks of dim 0 (torch's loop would accept unequal ones), and no output in
                # the source's storage (the planned route orders such copies).
                if (src is not None and set(map(_SHAPE, outputs)) == {_scatter_shape(src.shape, self._n)}
                        and _STORAGE_PTR(_STORAGE(src)) not in set(map(_STORAGE_PTR, map(_STORAGE, outputs)))):
                    _SCATTER_OUT(src, outputs, 0, None)  # checks before its first copy
                    return
            except (RuntimeError, ValueError):
                pass  # a shape that does not split, a layout or dtype torch's loop refuses: the plan names it
        run, _, args = self._plan_scatter(outputs, inputs, root)
        run(*args)

    def _inputs_on_devices(self, inputs) -> bool:
        """:meth:`_on_devices` for a list whose entries may be None (scatter's non-root inputs).

        One pass over the types decides which test applies (scatter's common input, the root's tensor
        and Nones, would fail :meth:`_on_devices` first and then be checked again)."""
        if not ((type(inputs) is list or type(inputs) is tuple) and len(inputs) == self._n):
            return False
        types = set(map(type, inputs))
        if types == _TENSOR_TYPES:
            return list(map(_GET_DEVICE, inputs)) == self._indices
        return (types <= _TENSOR_OR_NONE
                and all(t is None or t.get_device() == i for t, i in zip(inputs, self._indices)))  # noqa: B905

    def gather(self, outputs: OptionalTensors, inputs: Tensors, root: int = 0) -> None:
        run, _, args = self._plan_gather(outputs, inputs, root)
        run(*args)

    def all_to_all(self, outputs: Tensors, inputs: Tensors) -> None:
        run, _, args = self._plan_all_to_all(outputs, inputs)
        run(*args)

    def send_recv(self, outputs: Tensors, inputs: Tensors) -> None:
        run, _, args = self._plan_send_recv(outputs, inputs)
        run(*args)

    def _prepare(self, op: str, /, tensors, *args, **kwargs) -> Prepared:
        _, bind, bound = getattr(self, "_plan_" + op)(tensors, *args, **kwargs)
        return bind(*bound)

    # ----- synchronisation ----------------------------------------------------------------------------
    def barrier(self) -> None:
        return None

    def synchronize(self) -> None:
        for d in dict.fromkeys(d for d in self._devices if d.type == "cuda"):
            torch.cuda.synchronize(d)
