"""ProcessGroupCommunicator: the Communicator over a torch.distributed process group, one participant per rank.

Each rank holds one participant (its own device: ``cuda:LOCAL_RANK`` under NCCL, ``cpu`` under gloo),
so every list argument has length 1, participant indices are group ranks, and the calls forward to
:mod:`gpucomm.dist` (broadcast, reduce, all_reduce, all_gather_into_tensor, reduce_scatter_tensor,
scatter, gather, all_to_all_single, and one ``batch_isend_irecv`` for send_recv).

.. note:: ``op="avg"`` is native on NCCL and a sum followed by a division on gloo (see
   :mod:`gpucomm.dist`); with power-of-two world sizes and exactly representable sums both are exact.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch
import torch.distributed as td

from gpucomm import collectives as _spec
from gpucomm import dist as gd
from gpucomm.collectives import ReduceOp
from gpucomm.communicator.base import Communicator, OptionalTensors, Prepared, Tensors
from gpucomm.communicator.checks import check_held, check_root, check_shape, check_splits
from gpucomm.devices import DeviceLike, parse_device

__all__ = ["ProcessGroupCommunicator"]

_ALL_GATHER, _REDUCE_SCATTER = _spec.get("all_gather"), _spec.get("reduce_scatter")
_SCATTER, _GATHER = _spec.get("scatter"), _spec.get("gather")

Plan = tuple[Callable[..., object], str, tuple]
"""(the gpucomm.dist function, its name for gpucomm.dist.prepare, its arguments but the group)."""


def _concatenated(whole: torch.Tensor, part: torch.Tensor, n: int) -> bool:
    """The cheap test behind the spec's shape rule: ``whole`` is n ``part``s along dim 0."""
    ws, ps = whole.shape, part.shape
    if n == 1:  # a world of one: the same shape (one Size compare instead of four steps)
        return ws == ps and len(ps) > 0
    return len(ws) == len(ps) > 0 and ws[0] == n * ps[0] and ws[1:] == ps[1:]


def _chunks(t: torch.Tensor, n: int) -> list[torch.Tensor]:
    """``list(t.chunk(n))``; a world of one takes the tensor itself (the one chunk is all of it)."""
    return [t] if n == 1 else list(t.chunk(n))


class ProcessGroupCommunicator(Communicator):
    """The Communicator on a process group: this rank holds one participant, its own device.

    Args:
        group: the process group (None: the default group, which must be initialised, e.g. by
            :func:`gpucomm.dist.init` or inside :func:`gpucomm.dist.launch`).
        device: this rank's device; default :func:`gpucomm.dist.device` (``cuda:LOCAL_RANK`` under
            NCCL, ``cpu`` otherwise).

    Raises:
        RuntimeError: no default process group is initialised.
    """

    def __init__(self, group: td.ProcessGroup | None = None, device: DeviceLike | None = None):
        if not gd.is_initialized():
            raise RuntimeError("ProcessGroupCommunicator: no process group is initialised; call "
                               "gpucomm.dist.init() first (or run inside gpucomm.dist.launch)")
        self._group = group
        self._rank = td.get_rank(group)
        self._world = td.get_world_size(group)
        self._device = gd.device() if device is None else parse_device(device)

    def __repr__(self) -> str:
        return (f"ProcessGroupCommunicator(rank={self._rank}, world_size={self._world}, "
                f"device={self._device}, backend={gd.backend(self._group)!r})")

    # ----- who participates -------------------------------------------------------------------------
    @property
    def n(self) -> int:
        return self._world

    @property
    def rank(self) -> int:
        return self._rank

    @property
    def world_size(self) -> int:
        return self._world

    @property
    def devices(self) -> list[torch.device]:
        return [self._device]

    @property
    def group(self) -> td.ProcessGroup | None:
        """The process group (None: the default group)."""
        return self._group

    def _global(self, participant: int) -> int:
        return participant if self._group is None else td.get_global_rank(self._group, participant)

    def _root(self, root: int, arg: str = "root") -> int:
        """``root`` checked (``check_root``'s errors) and turned into a global rank."""
        if type(root) is not int or not 0 <= root < self._world:  # the common case costs two compares
            check_root(self, root, arg)
        return root if self._group is None else td.get_global_rank(self._group, root)

    def _one(self, tensors, arg: str, *, optional: bool = False):
        if type(tensors) is list and len(tensors) == 1:  # the common case, checked cheaply
            t = tensors[0]
            if type(t) is torch.Tensor and t.device == self._device:
                return t
        return check_held(self, tensors, arg, optional=optional)[0]

    # ----- plans: this class's checks, then the gpucomm.dist call (function, name, arguments) ---------
    def _plan_broadcast(self, tensors: Tensors, root: int = 0) -> Plan:
        return gd.broadcast, "broadcast", (self._one(tensors, "tensors"), self._root(root))

    def _plan_reduce(self, tensors: Tensors, root: int = 0, op: str | ReduceOp = "sum") -> Plan:
        return gd.reduce, "reduce", (self._one(tensors, "tensors"), self._root(root), op)

    def _plan_all_reduce(self, tensors: Tensors, op: str | ReduceOp = "sum") -> Plan:
        return gd.all_reduce, "all_reduce", (self._one(tensors, "tensors"), op)

    def _plan_all_gather(self, outputs: Tensors, inputs: Tensors) -> Plan:
        out, inp = self._one(outputs, "outputs"), self._one(inputs, "inputs")
        n = self._world
        if not _concatenated(out, inp, n):
            check_shape("outputs[0]", out, _ALL_GATHER.output_shape(inp.shape, n),
                        f"n={n} inputs of shape {list(inp.shape)} concatenated along dim 0")
        return gd.all_gather_into_tensor, "all_gather_into_tensor", (out, inp)

    def _plan_reduce_scatter(self, outputs: Tensors, inputs: Tensors, op: str | ReduceOp = "sum") -> Plan:
        out, inp = self._one(outputs, "outputs"), self._one(inputs, "inputs")
        n = self._world
        if not _concatenated(inp, out, n):
            check_shape("outputs[0]", out, _REDUCE_SCATTER.output_shape(inp.shape, n),
                        f"chunk of {n} of an input of shape {list(inp.shape)}")
        return gd.reduce_scatter_tensor, "reduce_scatter_tensor", (out, inp, op)

    def _plan_scatter(self, outputs: Tensors, inputs: OptionalTensors, root: int = 0) -> Plan:
        out = self._one(outputs, "outputs")
        global_root = self._root(root)
        chunks = None
        if self._rank == root:
            inp, n = self._one(inputs, "inputs"), self._world
            if not _concatenated(inp, out, n):
                check_shape("outputs[0]", out, _SCATTER.output_shape(inp.shape, n),
                            f"chunk of {n} of the root's input of shape {list(inp.shape)}")
            chunks = _chunks(inp, n)
        return gd.scatter, "scatter", (out, chunks, global_root)

    def _plan_gather(self, outputs: OptionalTensors, inputs: Tensors, root: int = 0) -> Plan:
        inp = self._one(inputs, "inputs")
        global_root = self._root(root)
        parts = None
        if self._rank == root:
            out, n = self._one(outputs, "outputs"), self._world
            if not _concatenated(out, inp, n):
                check_shape("outputs[0]", out, _GATHER.output_shape(inp.shape, n),
                            f"n={n} inputs of shape {list(inp.shape)} concatenated along dim 0")
            parts = _chunks(out, n)
        return gd.gather, "gather", (inp, parts, global_root)

    def _plan_all_to_all(self, outputs: Tensors, inputs: Tensors) -> Plan:
        out, inp = self._one(outputs, "outputs"), self._one(inputs, "inputs")
        shape = inp.shape
        if not shape or shape[0] % self._world or out.shape != shape:  # checked again, for the message
            check_splits("inputs[0]", inp, self._world)
            check_shape("outputs[0]", out, tuple(shape), "the input's shape")
        return gd.all_to_all_single, "all_to_all_single", (out, inp)

    def _plan_send_recv(self, outputs: Tensors, inputs: Tensors) -> Plan:
        out, inp = self._one(outputs, "outputs"), self._one(inputs, "inputs")
        if out.shape != inp.shape:
            check_shape("outputs[0]", out, tuple(inp.shape), "the input's shape")
        return gd.send_recv, "send_recv", (out, inp)

    # ----- collectives ------------------------------------------------------------------------------
    def broadcast(self, tensors: Tensors, root: int = 0) -> None:
        gd.broadcast(self._one(tensors, "tensors"), self._root(root), self._group)

    def reduce(self, tensors: Tensors, root: int = 0, op: str | ReduceOp = "sum") -> None:
        gd.reduce(self._one(tensors, "tensors"), self._root(root), op, self._group)

    def all_reduce(self, tensors: Tensors, op: str | ReduceOp = "sum") -> None:
        gd.all_reduce(self._one(tensors, "tensors"), op, self._group)

    def all_gather(self, outputs: Tensors, inputs: Tensors) -> None:
        fn, _, args = self._plan_all_gather(outputs, inputs)
        fn(*args, group=self._group)

    def reduce_scatter(self, outputs: Tensors, inputs: Tensors, op: str | ReduceOp = "sum") -> None:
        fn, _, args = self._plan_reduce_scatter(outputs, inputs, op)
        fn(*args, group=self._group)

    def scatter(self, outputs: Tensors, inputs: OptionalTensors, root: int = 0) -> None:
        fn, _, args = self._plan_scatter(outputs, inputs, root)
        fn(*args, group=self._group)

    def gather(self, outputs: OptionalTensors, inputs: Tensors, root: int = 0) -> None:
        fn, _, args = self._plan_gather(outputs, inputs, root)
        fn(*args, group=self._group)

    def all_to_all(self, outputs: Tensors, inputs: Tensors) -> None:
        fn, _, args = self._plan_all_to_all(outputs, inputs)
        fn(*args, group=self._group)

    def send_recv(self, outputs: Tensors, inputs: Tensors) -> None:
        fn, _, args = self._plan_send_recv(outputs, inputs)
        fn(*args, group=self._group)

    def _prepare(self, op: str, /, tensors, *args, **kwargs) -> Prepared:
        fn, name, bound = getattr(self, "_plan_" + op)(tensors, *args, **kwargs)
        prepare = getattr(gd, "prepare", None)
        if prepare is not None:  # gpucomm.dist checks once and returns the raw torch.distributed call
            return prepare(name, *bound, group=self._group)
        return functools.partial(fn, *bound, group=self._group)

    # ----- point to point (process groups only) -------------------------------------------------------
    def send(self, tensor: torch.Tensor, dst: int) -> None:
        """Send ``tensor`` to participant (group rank) ``dst``; blocks until it is handed off."""
        gd.send(tensor, self._root(dst, "dst"), self._group)

    def recv(self, tensor: torch.Tensor, src: int) -> None:
        """Receive into ``tensor`` from participant (group rank) ``src``."""
        gd.recv(tensor, self._root(src, "src"), self._group)

    # ----- synchronisation ----------------------------------------------------------------------------
    def barrier(self) -> None:
        gd.barrier(self._group)

    def synchronize(self) -> None:
        if self._device.type == "cuda":
            torch.cuda.synchronize(self._device)
