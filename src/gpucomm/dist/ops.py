"""The collectives of :mod:`gpucomm.dist`: torch.distributed's signatures, our ops, checks that cost nothing.

Each function checks its tensor arguments' types (one ``isinstance``), asks whether the opt-in
debug check is on, maps the op (a dict lookup after the first call), and issues the torch.distributed
call with positional arguments: torch's collectives sit under a ``*args, **kwargs`` logging
decorator, so keywords cost a dict per call that positions do not.  Nothing on the common path
calls another gpucomm function besides the debug flag (each Python call is ~0.1 µs, and the budget
over raw torch.distributed is 2 µs).  Their semantics are described in
:mod:`gpucomm.dist`; :mod:`gpucomm.dist.prepared` builds on the helpers here to check once and then
call torch directly.
"""

from __future__ import annotations

import os

import torch
import torch.distributed as td

import gpucomm.dist.debug as debug
from gpucomm._validate import check_tensor, fail_value
from gpucomm.collectives import ReduceOp, parse_op
from gpucomm.collectives.spec import td_op
from gpucomm.dist.process_group import _GROUP_INFO as _GROUPS

__all__ = [
    "P2POp",
    "all_gather_into_tensor",
    "all_reduce",
    "all_to_all_single",
    "backend",
    "barrier",
    "batch_isend_irecv",
    "broadcast",
    "gather",
    "get_rank",
    "get_world_size",
    "irecv",
    "isend",
    "recv",
    "reduce",
    "reduce_scatter_tensor",
    "scatter",
    "send",
    "send_recv",
]

P2POp = td.P2POp
isend = td.isend
irecv = td.irecv
batch_isend_irecv = td.batch_isend_irecv
# torch >= 2.12 renames the tensor forms and deprecates the old names; use whichever exists.
_all_gather_tensor = getattr(td, "all_gather_single", None) or td.all_gather_into_tensor
_reduce_scatter_tensor = getattr(td, "reduce_scatter_single", None) or td.reduce_scatter_tensor

_TORCH_OPS = {o: td_op(td, o) for o in ReduceOp if o is not ReduceOp.AVG}
_AVG = object()  # the torch op of ReduceOp.AVG depends on the backend
_RED_OP_TYPE = type(td.ReduceOp.SUM)  # torch.distributed.ReduceOp.RedOpType
_OPS: dict[object, object] = {}  # op as the caller passed it -> torch op (or _AVG); parse_op once per key
_is_tensor = torch.Tensor  # isinstance against a module global: one lookup, not two
_debug_on = debug.debug_check_enabled  # one global lookup on the hot path, not a module attribute
_maybe_debug = debug.maybe_on  # [0](): False when the check is surely off (a C call; see debug.maybe_on)
_ENVIRON = debug._ENVIRON
_NATIVE_AVG = td.ReduceOp.AVG
_SUM = td.ReduceOp.SUM
# dtypes op="avg" accepts; a set lookup on tensor.dtype is cheaper than is_floating_point()/is_complex()
_AVG_DTYPES = frozenset(d for d in (getattr(torch, n, None) for n in (
    "float16", "bfloat16", "float32", "float64", "complex32", "complex64", "complex128",
    "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz")) if d is not None)


def get_rank(group: td.ProcessGroup | None = None) -> int:
    """This process's rank in ``group`` (torch.distributed.get_rank)."""
    return td.get_rank(group)


def get_world_size(group: td.ProcessGroup | None = None) -> int:
    """The number of processes in ``group`` (torch.distributed.get_world_size)."""
    return td.get_world_size(group)


def backend(group: td.ProcessGroup | None = None) -> str:
    """The backend of ``group`` as a lower-case str ("nccl", "gloo", ...)."""
    return str(td.get_backend(group)).lower()


class _DefaultGroupReader:
    """``torch.distributed.group.WORLD`` for a torch whose default-group record this module cannot read directly."""

    @property
    def _default_pg(self):
        return td.group.WORLD


# the default group, as torch.distributed keeps it: ``group.WORLD`` is two Python property calls (about 1,400
# host instructions under callgrind), the attribute behind them one read; another torch gets the property
_WORLD = getattr(td.distributed_c10d, "_world", None)
if not hasattr(_WORLD, "_default_pg"):
    _WORLD = _DefaultGroupReader()


def _group_info(group) -> tuple[str, int, int]:
    """``(backend(group), get_world_size(group), get_rank(group))``, asked of torch once per group object.

    A group's backend and size never change, and the key is the group object itself (the default
    group's object for None), so a new group after a shutdown is a new key.
    """
    key = _WORLD._default_pg if group is None else group
    info = _GROUPS.get(key) if key is not None else None
    if info is None:
        # backend() first: it raises torch's error when there is no group or this rank is not in it
        info = (backend(group), td.get_world_size(group), td.get_rank(group))
        if len(_GROUPS) > 64:  # destroyed groups stay referenced here; keep that bounded
            _GROUPS.clear()
        _GROUPS[key] = info
    return info


class _DivideOnWait:
    """An async work whose ``wait()`` also divides the result by the world size (avg without AVG)."""

    def __init__(self, work, tensor: torch.Tensor | None, divisor: int):
        self._work, self._tensor, self._divisor = work, tensor, divisor

    def wait(self, *args, **kwargs) -> bool:
        done = self._work.wait(*args, **kwargs)
        if self._tensor is not None:
            self._tensor.div_(self._divisor)
            self._tensor = None
        return done

    def is_completed(self) -> bool:
        return self._tensor is None and self._work.is_completed()

    def __getattr__(self, name):
        return getattr(self._work, name)


def _learn_op(op: object) -> object:
    """parse_op (with its errors) for an op not seen before; remembers str and torch enum keys."""
    red = parse_op(op)
    top = _AVG if red is ReduceOp.AVG else _TORCH_OPS[red]
    if isinstance(op, str) or type(op) is _RED_OP_TYPE:
        _OPS[op] = top
    return top


def _torch_op(op: object, tensor: torch.Tensor, group) -> tuple[object, bool]:
    """Map our op to torch's; the bool says "sum now, divide by the world size afterwards"."""
    try:
        top = _OPS[op]
    except (KeyError, TypeError):  # TypeError: an unhashable op, which parse_op rejects
        top = _learn_op(op)
    if top is not _AVG:
        return top, False
    top, divisor = _avg_op(tensor, group)
    return top, divisor > 0


def _avg_op(tensor: torch.Tensor, group) -> tuple[object, int]:
    """op="avg": ``(torch op, divisor)``: torch's AVG and 0 on NCCL, else SUM and the world size.

    Integer tensors are refused.  The divisor comes back with the op so that the caller divides
    without asking for the group again.
    """
    if tensor.dtype not in _AVG_DTYPES and not (tensor.is_floating_point() or tensor.is_complex()):
        raise fail_value("op", "a floating-point tensor for op='avg'", f"dtype {tensor.dtype}",
                         "use op='sum' and divide yourself, or cast to a float dtype")
    info = _GROUPS.get(_WORLD._default_pg if group is None else group) or _group_info(group)  # inline cache
    if info[0] == "nccl":
        return _NATIVE_AVG, 0
    return _SUM, info[1]


def _divided(work, tensor: torch.Tensor | None, divisor: int, async_op: bool):
    """The result of a reduction issued with SUM for avg: ``tensor /= divisor`` now, or in ``wait()``."""
    if async_op:
        return _DivideOnWait(work, tensor, divisor)
    if tensor is not None:
        tensor.div_(divisor)
    return None


def all_reduce(tensor: torch.Tensor, op: str | ReduceOp = "sum", group=None, async_op: bool = False):
    """Reduce ``tensor`` across the group in place; every rank gets the result (torch.distributed.all_reduce)."""
    if not isinstance(tensor, _is_tensor) and tensor is not None:
        check_tensor(tensor, "tensor")
    if (_maybe_debug[0]() or os.environ is not _ENVIRON) and _debug_on():
        debug.verify("all_reduce", group, {"tensor": tensor})
    try:
        top = _OPS[op]
    except (KeyError, TypeError):  # TypeError: an unhashable op, which parse_op rejects
        top = _learn_op(op)
    if top is not _AVG:
        return td.all_reduce(tensor, top, group, async_op)  # None unless async_op, as ours
    if tensor.dtype not in _AVG_DTYPES:  # _avg_op, inline on the common path (a Python call is ~0.1 us)
        _avg_op(tensor, group)  # refuses an integer tensor
    info = _GROUPS.get(_WORLD._default_pg if group is None else group) or _group_info(group)
    if info[0] == "nccl":
        return td.all_reduce(tensor, _NATIVE_AVG, group, async_op)
    return _divided(td.all_reduce(tensor, _SUM, group, async_op), tensor, info[1], async_op)


def reduce(tensor: torch.Tensor, dst: int, op: str | ReduceOp = "sum", group=None, async_op: bool = False):
    """Reduce ``tensor`` into global rank ``dst``'s tensor; the other ranks' tensors are left unchanged.

    .. note:: gloo writes partial results into non-destination buffers, so there a copy is reduced
       instead (one extra memcpy on those ranks).
    """
    if not isinstance(tensor, _is_tensor) and tensor is not None:
        check_tensor(tensor, "tensor")
    if (_maybe_debug[0]() or os.environ is not _ENVIRON) and _debug_on():
        debug.verify("reduce", group, {"tensor": tensor})
    try:
        top = _OPS[op]
    except (KeyError, TypeError):
        top = _learn_op(op)
    divisor = 0
    if top is _AVG:
        top, divisor = _avg_op(tensor, group)
    # _group_info's cache, read inline (a Python call is a fifth of this function's budget)
    info = _GROUPS.get(_WORLD._default_pg if group is None else group) or _group_info(group)
    if info[0] == "nccl":  # NCCL leaves non-destination buffers alone: no copy, as raw (avg is native)
        return td.reduce(tensor, dst, top, group, async_op)
    is_dst = (info if group is None else _group_info(None))[2] == dst  # global rank, as torch's dst
    work = td.reduce(tensor if is_dst else tensor.clone(), dst, top, group, async_op)
    return _divided(work, tensor if is_dst else None, divisor, async_op) if divisor else work


def broadcast(tensor: torch.Tensor, src: int, group=None, async_op: bool = False):
    """Copy global rank ``src``'s tensor into every rank's ``tensor`` (torch.distributed.broadcast)."""
    if not isinstance(tensor, _is_tensor) and tensor is not None:
        check_tensor(tensor, "tensor")
    if (_maybe_debug[0]() or os.environ is not _ENVIRON) and _debug_on():
        debug.verify("broadcast", group, {"tensor": tensor})
    return td.broadcast(tensor, src, group, async_op)


def all_gather_into_tensor(output_tensor: torch.Tensor, input_tensor: torch.Tensor, group=None,
                           async_op: bool = False):
    """Concatenate every rank's ``input_tensor`` along dim 0 into ``output_tensor`` on every rank."""
    if not isinstance(output_tensor, _is_tensor) and output_tensor is not None:
        check_tensor(output_tensor, "output_tensor")
    if not isinstance(input_tensor, _is_tensor) and input_tensor is not None:
        check_tensor(input_tensor, "input_tensor")
    if (_maybe_debug[0]() or os.environ is not _ENVIRON) and _debug_on():
        debug.verify("all_gather_into_tensor", group, {"output_tensor": output_tensor, "input_tensor": input_tensor})
    return _all_gather_tensor(output_tensor, input_tensor, group, async_op)


def reduce_scatter_tensor(output: torch.Tensor, input: torch.Tensor, op: str | ReduceOp = "sum", group=None,
                          async_op: bool = False):
    """Reduce ``input`` across ranks; rank i's ``output`` gets chunk i (dim 0) of the result."""
    if not isinstance(output, _is_tensor) and output is not None:
        check_tensor(output, "output")
    if not isinstance(input, _is_tensor) and input is not None:
        check_tensor(input, "input")
    if (_maybe_debug[0]() or os.environ is not _ENVIRON) and _debug_on():
        debug.verify("reduce_scatter_tensor", group, {"output": output, "input": input})
    try:
        top = _OPS[op]
    except (KeyError, TypeError):
        top = _learn_op(op)
    if top is not _AVG:
        return _reduce_scatter_tensor(output, input, top, group, async_op)
    top, divisor = _avg_op(input, group)
    work = _reduce_scatter_tensor(output, input, top, group, async_op)
    return _divided(work, output, divisor, async_op) if divisor else work


def scatter(tensor: torch.Tensor, scatter_list: list[torch.Tensor] | None = None, src: int = 0, group=None,
            async_op: bool = False):
    """Rank i's ``tensor`` gets ``scatter_list[i]`` of global rank ``src`` (torch.distributed.scatter)."""
    if not isinstance(tensor, _is_tensor) and tensor is not None:
        check_tensor(tensor, "tensor")
    if (_maybe_debug[0]() or os.environ is not _ENVIRON) and _debug_on():
        debug.verify("scatter", group, {"tensor": tensor})
    return td.scatter(tensor, scatter_list, src, group, async_op)


def gather(tensor: torch.Tensor, gather_list: list[torch.Tensor] | None = None, dst: int = 0, group=None,
           async_op: bool = False):
    """Global rank ``dst``'s ``gather_list[i]`` gets rank i's ``tensor`` (torch.distributed.gather)."""
    if not isinstance(tensor, _is_tensor) and tensor is not None:
        check_tensor(tensor, "tensor")
    if (_maybe_debug[0]() or os.environ is not _ENVIRON) and _debug_on():
        debug.verify("gather", group, {"tensor": tensor})
    return td.gather(tensor, gather_list, dst, group, async_op)


def all_to_all_single(output: torch.Tensor, input: torch.Tensor, output_split_sizes: list[int] | None = None,
                      input_split_sizes: list[int] | None = None, group=None, async_op: bool = False):
    """Chunk j (dim 0) of rank i's ``input`` lands as chunk i of rank j's ``output``."""
    if output_split_sizes is None and input_split_sizes is None:
        if not isinstance(output, _is_tensor) and output is not None:
            check_tensor(output, "output")
        if not isinstance(input, _is_tensor) and input is not None:
            check_tensor(input, "input")
        if (_maybe_debug[0]() or os.environ is not _ENVIRON) and _debug_on():
            debug.verify("all_to_all_single", group, {"output": output, "input": input})
    elif (_maybe_debug[0]() or os.environ is not _ENVIRON) and _debug_on():  # uneven splits: shapes may differ by rank, so nothing to compare
        debug.verify("all_to_all_single", group, {})
    return td.all_to_all_single(output, input, output_split_sizes, input_split_sizes, group, async_op)


def send(tensor: torch.Tensor, dst: int, group=None, tag: int = 0) -> None:
    """Send ``tensor`` to global rank ``dst`` (blocking; torch.distributed.send)."""
    check_tensor(tensor, "tensor")
    td.send(tensor, dst, group, tag)


def recv(tensor: torch.Tensor, src: int | None = None, group=None, tag: int = 0) -> int:
    """Receive into ``tensor`` from global rank ``src`` (any rank when None); returns the sender's rank."""
    check_tensor(tensor, "tensor")
    return td.recv(tensor, src, group, tag)


class _AllWorks:
    """Several works waited as one."""

    def __init__(self, works):
        self._works = list(works)

    def wait(self, *args, **kwargs) -> bool:
        return all([w.wait(*args, **kwargs) is not False for w in self._works])

    def is_completed(self) -> bool:
        return all(w.is_completed() for w in self._works)


def send_recv(output: torch.Tensor, input: torch.Tensor, group=None, async_op: bool = False):
    """Ring shift: send ``input`` to group rank ``rank+1`` and receive ``output`` from ``rank-1`` (mod n).

    One ``batch_isend_irecv`` of a send and a receive, so no rank blocks waiting for its peer to
    post first.  In a world of one the output is a copy of the input.
    """
    if not isinstance(output, _is_tensor) and output is not None:
        check_tensor(output, "output")
    if not isinstance(input, _is_tensor) and input is not None:
        check_tensor(input, "input")
    if (_maybe_debug[0]() or os.environ is not _ENVIRON) and _debug_on():
        debug.verify("send_recv", group, {"output": output, "input": input})
    _, n, me = _group_info(group)  # cached: size and group rank never change
    if n == 1:
        output.copy_(input)
        return _AllWorks([]) if async_op else None
    peer = (lambda r: r) if group is None else (lambda r: td.get_global_rank(group, r))
    ops = [td.P2POp(td.isend, input, peer((me + 1) % n), group),
           td.P2POp(td.irecv, output, peer((me - 1) % n), group)]
    works = _AllWorks(td.batch_isend_irecv(ops))
    if async_op:
        return works
    works.wait()
    return None


def barrier(group=None, async_op: bool = False, device_ids: list[int] | None = None):
    """Block until every rank of ``group`` reaches the barrier (on NCCL: on this process's GPU)."""
    if device_ids is None and _group_info(group)[0] == "nccl":
        device_ids = [torch.cuda.current_device()]
    return td.barrier(group=group, async_op=async_op, device_ids=device_ids)
