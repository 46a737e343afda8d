"""Prepared collectives: check once, then rerun on the same buffers with no per-call checks.

MPI 4's persistent collectives (``MPI_Allreduce_init`` + ``MPI_Start``) in PyTorch::

    p = gpucomm.comm.prepare("all_reduce", grads, op="avg", outputs=grads)   # checks, decides the route
    for step in range(steps):
        ...                  # refill grads in place
        p()                  # the all-reduce, on the same buffers

Contract:

* ``prepare`` checks every argument exactly as the public function does (same errors, raised at
  prepare time), allocates the outputs when ``outputs`` is None (as the public function would have
  allocated them; where that function returns the input itself or a view of it, so does ``p``), and
  decides everything that depends only on where the buffers live.
* ``p()`` runs the collective and returns the outputs (the same objects every time, in the public
  function's return type).  The buffers' **contents** may change between calls (that is the point);
  they must not be resized, re-strided, moved or freed, and no other tensor may be swapped in:
  nothing is checked again, so a violated contract gives torch's errors or wrong results.
* ``graph=True`` (every participant on one CUDA device, e.g. ``[cuda:0] * 4``) captures one call into a
  ``torch.cuda.CUDAGraph`` after warm-up calls on a side stream, and ``p()`` replays it: the
  buffers are then also fixed in memory for the graph's lifetime.  On CPU devices it is a
  ValueError.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import torch

from gpucomm._validate import check_tensor, fail_type, fail_value
from gpucomm.comm import _broadcast, _exchange, _kernels, _reductions, _scatter_gather
from gpucomm.comm._checks import check_exactly_one

__all__ = ["Prepared", "prepare"]


class Prepared:
    """A checked collective bound to its buffers; call it to run the collective again.

    Attributes:
        op: the collective's name.
        outputs: what each call returns (the public function's return value, filled in place).
        graphed: whether calls replay a CUDA graph.
    """

    __slots__ = ("_run", "graphed", "op", "outputs")

    def __init__(self, op: str, run: Callable[[], object], outputs: Any, graphed: bool):
        self.op, self._run, self.outputs, self.graphed = op, run, outputs, graphed

    def __call__(self) -> Any:
        self._run()
        return self.outputs

    def __repr__(self) -> str:
        return f"Prepared(op={self.op!r}, graphed={self.graphed})"


def _no_options(op: str, options: dict, allowed: tuple[str, ...]) -> None:
    extra = sorted(set(options) - set(allowed))
    if extra:
        raise TypeError(f"prepare: {op!r} takes the options {list(allowed) or 'none'}, but got {extra}; "
                        f"pass the options gpucomm.comm.{op} itself takes")


def _broadcast_plan(inputs, outputs, devices=None):
    check_tensor(inputs, "inputs")
    if outputs is None and devices is None:
        raise TypeError("prepare('broadcast'): expected devices= or outputs=, but got neither; pass "
                        "devices=[...] to have outputs allocated, or outputs=[...] to supply them")
    if outputs is not None:
        if devices is not None:
            check_exactly_one("broadcast", "devices", devices, "outputs", outputs)
        outs = _broadcast.check_broadcast_out(inputs, outputs)
    else:
        outs = _broadcast.broadcast_outputs(inputs, devices)
    return _kernels.bind_broadcast(inputs, outs), outs, outs


def _scatter_plan(inputs, outputs, devices=None, chunk_sizes=None, dim=0, streams=None):
    check_tensor(inputs, "inputs")
    if outputs is None:
        if devices is None:
            raise TypeError("prepare('scatter'): expected devices= or outputs=, but got neither")
        outputs = _scatter_gather.scatter_outputs(inputs, devices, chunk_sizes, dim)
        devices = chunk_sizes = None
    outs, d, strs = _scatter_gather.check_scatter_out(inputs, outputs, devices, chunk_sizes, dim, streams)
    return _kernels.bind_scatter(inputs, outs, d, strs), tuple(outs), outs


def _gather_plan(inputs, outputs, dim=0, destination=None):
    ts, d, shape, out = _scatter_gather.check_gather(inputs, dim, destination, outputs)
    if out is None:
        out = _scatter_gather.gather_output(ts, shape, destination)
    return _kernels.bind_gather(ts, out, d), out, [out]


def _reduce_add_plan(inputs, outputs, destination=None):
    ts, dest = _reductions.check_reduce_add(inputs, destination)
    if len(ts) == 1:  # reduce_add returns a single input itself
        if outputs is not None:
            raise fail_value("outputs", "None for a single input (reduce_add returns the input itself)",
                             "a tensor", "omit outputs=")
        return _kernels.noop, ts[0], [ts[0]]
    if outputs is None:
        out = torch.empty_like(next(t for t in ts if t.device == dest))
    else:
        _, _, _, out = _reductions.check_reduce(ts, destination, "sum", outputs)
    return _kernels.bind_reduce(ts, out, _reductions.ReduceOp.SUM), out, [out]


def _reduce_plan(inputs, outputs, destination=None, op="sum"):
    ts, dest, o, out = _reductions.check_reduce(inputs, destination, op, outputs)
    if out is None:
        from gpucomm.comm._alloc import empty_on

        out = empty_on(ts[0].shape, ts[0].dtype, dest, pinned=any(t.is_cuda for t in ts))
    return _kernels.bind_reduce(ts, out, o), out, [out]


def _all_reduce_plan(inputs, outputs, op="sum"):
    ts, o, outs, _ = _reductions.check_all_reduce(inputs, op, outputs)
    if outs is None:
        outs = [torch.empty_like(t) for t in ts]
    return _kernels.bind_all_reduce(ts, outs, o), outs, outs


def _reduce_scatter_plan(inputs, outputs, dim=0, op="sum"):
    ts, d, o, chunk_shape, _, outs = _reductions.check_reduce_scatter(inputs, dim, op, outputs)
    if outs is None:
        outs = [torch.empty(chunk_shape, dtype=t.dtype, device=t.device) for t in ts]
    return _kernels.bind_reduce_scatter(ts, outs, o, d), outs, outs


def _all_gather_plan(inputs, outputs, dim=0):
    ts, d, shape, devices, outs = _exchange.check_all_gather(inputs, dim, outputs)
    if outs is None:
        outs = [torch.empty(shape, dtype=ts[0].dtype, device=dev) for dev in devices]
    return _kernels.bind_all_gather(ts, outs, d), outs, outs


def _all_to_all_plan(inputs, outputs):
    lists, devices, one = _exchange.check_all_to_all(inputs)
    if outputs is None:
        outputs = _exchange.all_to_all_outputs(lists, devices)
    result, dsts, srcs, _ = _exchange.check_all_to_all_out(lists, devices, one, outputs)
    return _kernels.bind_all_to_all(dsts, srcs), result, dsts


def _send_recv_plan(inputs, outputs):
    ts = _exchange.check_send_recv(inputs)
    outs = _exchange.send_recv_outputs(ts) if outputs is None else _exchange.check_send_recv_out(ts, outputs)
    return _kernels.bind_send_recv(ts, outs), outs, outs


_PLANS: dict[str, Callable] = {
    "all_gather": _all_gather_plan,
    "all_reduce": _all_reduce_plan,
    "all_to_all": _all_to_all_plan,
    "broadcast": _broadcast_plan,
    "gather": _gather_plan,
    "reduce": _reduce_plan,
    "reduce_add": _reduce_add_plan,
    "reduce_scatter": _reduce_scatter_plan,
    "scatter": _scatter_plan,
    "send_recv": _send_recv_plan,
}
"""How each public function is bound: check (its own checks), allocate, and pick the kernel."""

def prepare(op: str, /, inputs: Any, outputs: Any = None, *, graph: bool = False, **options: Any) -> Prepared:
    """Check a collective once and return a :class:`Prepared` that reruns it on the same buffers.

    Args:
        op: the public function's name: ``"broadcast"``, ``"scatter"``, ``"gather"``,
            ``"reduce_add"``, ``"reduce"``, ``"all_reduce"``, ``"all_gather"``,
            ``"reduce_scatter"``, ``"all_to_all"`` or ``"send_recv"``.
        inputs: what the function takes as its first argument (a tensor for broadcast and scatter,
            a list of tensors otherwise, a list of lists for all_to_all).
        outputs: what it takes as ``out=`` (None: allocated here, as the function would allocate).
        graph: capture the call into a CUDA graph (every participant on a GPU).
        **options: the function's other arguments by name (``op=``, ``dim=``, ``devices=``,
            ``destination=`` (or ``root=``), ``chunk_sizes=``, ``streams=``).

    Returns:
        :class:`Prepared`; ``p()`` runs the collective and returns the outputs.

    Raises:
        TypeError, ValueError: exactly what the public function raises for these arguments, at
            prepare time; an unknown ``op`` or option; ``graph=True`` off the GPU.
    """
    if not isinstance(op, str):
        raise fail_type("op", "a collective's name such as 'all_reduce'", op)
    plan = _PLANS.get(op)
    if plan is None:
        raise fail_value("op", f"one of {sorted(_PLANS)}", repr(op), "name a gpucomm.comm function")
    if not isinstance(graph, bool):
        raise fail_type("graph", "a bool", graph)
    if "root" in options and op in ("reduce", "reduce_add", "gather"):
        options["destination"] = options.pop("root")
    allowed = tuple(p for p in inspect.signature(plan).parameters if p not in ("inputs", "outputs"))
    _no_options(op, options, allowed)
    run, result, touched = plan(inputs, outputs, **options)
    if graph:
        devices = [t.device for t in _flat(inputs)] + [t.device for t in touched]
        return Prepared(op, _kernels.capture(run, devices), result, True)
    return Prepared(op, run, result, False)


def _flat(x: Any) -> list[torch.Tensor]:
    if isinstance(x, torch.Tensor):
        return [x]
    return [t for item in x for t in _flat(item)]
