"""The Communicator: one interface over one-process (``gpucomm.comm``) and many-process (``gpucomm.dist``) collectives.

Every operation takes **one tensor per participant that this process holds**, as a list:

* a :class:`LocalCommunicator` holds every participant (all its devices) — lists of length ``n``;
* a :class:`ProcessGroupCommunicator` holds its own participant — lists of length 1.

Participants are numbered globally ``0 .. n-1`` (for process groups: participant = rank).  Roots are
global participant indices.  Shapes follow :mod:`gpucomm.collectives` (dim 0 is split/concatenated):

================  =======================================  ==========================================
operation         inputs (per held participant)            afterwards
================  =======================================  ==========================================
broadcast         ``tensors``                              every tensor equals the root's (in place)
reduce            ``tensors``                              the root's tensor holds the reduction
all_reduce        ``tensors``                              every tensor holds the reduction (in place)
all_gather        ``outputs [n*c]``, ``inputs [c]``        outputs = inputs concatenated, in order
reduce_scatter    ``outputs [c]``, ``inputs [n*c]``        output i = chunk i of the reduction
scatter           ``outputs [c]``, ``inputs [n*c]``        output i = chunk i of the root's input
gather            ``outputs [n*c]``, ``inputs [c]``        the root's output = inputs concatenated
all_to_all        ``outputs [n*c]``, ``inputs [n*c]``      output j chunk i = input i chunk j
send_recv         ``outputs``, ``inputs``                  output i = input (i-1) mod n
================  =======================================  ==========================================

For rooted ops, non-root participants' ``inputs`` (scatter) or ``outputs`` (gather) entries are
ignored and may be ``None``.  A world of one participant is an ordinary world: every op is then a
copy or a no-op, with no special path in callers.

**The methods come from the collective rows.**  Every row of :mod:`gpucomm.collectives` that declares a
:class:`~gpucomm.collectives.spec.Method` becomes one method of this class, with that name, parameters,
defaults and docstring.  Each implementation builds every such method once, when the class is created
(:meth:`Communicator._method_of`: a closure over the row's facts, never a generic binder per call), as a
function with the row's own parameters and defaults (:func:`with_parameters`), so that Python binds each
call's arguments, keywords included, in C.  :class:`ProcessGroupCommunicator` runs the row's own gpucomm.dist call
(``calls.gpucomm_dist``); :class:`LocalCommunicator` runs gpucomm.comm's form of the row (registered by the
kernel module that implements it, ``gpucomm.comm._kernels.local_form``).  Adding a collective's row adds
its method to every Communicator.

**What a method returns** is what :mod:`gpucomm.comm`'s function of the same name returns, for the
participants this process holds: the output tensors as a list (a tuple for scatter, as
``torch.cuda.comm.scatter``), and for the one-destination collectives (reduce, gather) the root's output
tensor, or None in a process that does not hold the root.  Both implementations return the same.

Operations are enqueued on each device's current stream and return without synchronising the host
(on CPU they complete before returning); :meth:`synchronize` waits for them.
"""

from __future__ import annotations

import abc
import inspect
from collections.abc import Callable, Sequence
from types import MappingProxyType
from typing import Any

import torch

from gpucomm import collectives as _collectives
from gpucomm._validate import fail_type, fail_value
from gpucomm.collectives import Collective
from gpucomm.collectives.spec import ROOT, Args
from gpucomm.prepared import Prepared

__all__ = ["LIST", "ROOTS", "TUPLE", "Communicator", "OptionalTensors", "Prepared", "Tensors", "methods", "result",
           "result_source", "returns", "signed", "with_parameters"]

Tensors = Sequence[torch.Tensor]
OptionalTensors = Sequence[torch.Tensor | None]

_ROWS: dict[str, Collective] = {str(name): row for name, row in _collectives.COLLECTIVES.items() if row.method}


def methods() -> list[str]:
    """The collective methods every Communicator has (the rows with a Communicator method), in table order."""
    return list(_ROWS)


class Communicator(abc.ABC):
    """The collective interface shared by one-process and many-process implementations.

    The collective methods (``broadcast``, ``all_reduce``, ... — :func:`methods`) are defined from the
    collective rows (see the module docstring); an implementation provides :meth:`_args` and :meth:`_bind`,
    which receive the row and one call's arguments, and either :meth:`_run` or its own :meth:`_method_of`.
    """

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name, row in _ROWS.items():  # every implementation's methods, built once per class
            if name not in cls.__dict__:
                setattr(cls, name, cls._method_of(row))

    # ----- who participates -------------------------------------------------------------------------
    @property
    @abc.abstractmethod
    def n(self) -> int:
        """Participants in all (devices of a LocalCommunicator; ranks of a process group)."""

    @property
    @abc.abstractmethod
    def rank(self) -> int:
        """This process's rank (0 for a LocalCommunicator)."""

    @property
    @abc.abstractmethod
    def world_size(self) -> int:
        """Processes in the group (1 for a LocalCommunicator)."""

    @property
    @abc.abstractmethod
    def devices(self) -> list[torch.device]:
        """The devices of the participants this process holds, in participant order."""

    @property
    def participants(self) -> list[int]:
        """Global indices of the participants this process holds."""
        k = len(self.devices)
        return list(range(self.rank * k, self.rank * k + k))

    @abc.abstractmethod
    def barrier(self) -> None:
        """Return once every participant has reached the barrier."""

    @abc.abstractmethod
    def synchronize(self) -> None:
        """Wait until every operation this process enqueued has finished on its devices."""

    # ----- how an implementation runs a row -----------------------------------------------------------
    @abc.abstractmethod
    def _args(self, row: Collective, values: tuple) -> Args:
        """This implementation's checks of one method call (``values``: its arguments in parameter order)
        and the row's :class:`~gpucomm.collectives.spec.Args` for it."""

    def _run(self, row: Collective, a: Args) -> None:
        """Perform the checked call now (the library's own checks run too): what the default body runs."""
        raise NotImplementedError(f"{type(self).__name__} runs {row.name} through its own _method_of")

    @classmethod
    def _method_of(cls, row: Collective) -> Callable[..., Any]:
        """``row``'s method for this class, built once per class (an implementation may build its own closure
        over the row's facts: :func:`with_parameters` and :func:`signed` give it the parameters and the signature).

        The default checks through :meth:`_args`, runs through :meth:`_run` and returns what the module
        docstring says.
        """
        kind = returns(row)

        def body(self: Communicator, *values: Any) -> Any:
            a = self._args(row, values)
            self._run(row, a)
            return result(row, a, kind)

        return signed(row, with_parameters(row, body))

    @abc.abstractmethod
    def _bind(self, row: Collective, a: Args) -> Callable[[], object]:
        """The library's prepared form of the checked call: a callable that reruns it, unchecked."""

    # ----- prepared collectives ---------------------------------------------------------------------
    def prepare(self, op: str, /, *args: Any, graph: bool = False, **kwargs: Any) -> Prepared:
        """Check a collective once; return ``p()`` that reruns it on the same tensors, unchecked.

        ``op`` is the method's name and the rest are the method's own arguments
        (``comm.prepare("all_reduce", grads, op="avg")`` prepares ``comm.all_reduce(grads, op="avg")``).
        Every check the method makes is made here, with its errors; ``p()`` then skips them all
        (what it returns is not part of the contract: it is whatever the bound kernel returns, so
        that no wrapper costs a call).  The tensors' contents may change between calls; they must not be resized,
        moved, freed or replaced.  ``graph=True`` (CUDA devices only) captures one call into a
        CUDA graph after warm-up calls, and ``p()`` replays it.
        """
        if not isinstance(op, str):
            raise fail_type("op", "a collective method's name such as 'all_reduce'", op)
        row = _ROWS.get(op)
        if row is None:
            raise fail_value("op", f"one of {methods()}", repr(op), "name a Communicator collective")
        if not isinstance(graph, bool):
            raise fail_type("graph", "a bool", graph)
        run = self._bind(row, self._args(row, _bind_arguments(row, args, kwargs)))
        if graph:
            from gpucomm.comm._kernels import capture  # deferred: comm is the heavier package

            return Prepared.of(capture(run, self.devices), op, graphed=True)
        return Prepared.of(run, op)


LIST, TUPLE, ROOTS = 0, 1, 2  # what a method returns: its outputs as a list, as a tuple, or the root's


def returns(row: Collective) -> int:
    """What ``row``'s method returns (see the module docstring), decided once per row."""
    if row.output_buffer == ROOT or (row.has_root and row.reduces):  # one destination: the root's tensor
        return ROOTS
    if row.input_buffer == ROOT and "tensors" not in row.method.params:  # scatter, as torch.cuda.comm's
        return TUPLE
    return LIST


def result(row: Collective, a: Args, kind: int | None = None) -> Any:
    """What a Communicator method returns for call ``a`` (see the module docstring)."""
    kind = returns(row) if kind is None else kind
    outputs = a.outputs
    if kind == LIST:
        return list(outputs)
    if kind == TUPLE:
        return tuple(outputs)
    k = a.root - a.rank * len(outputs)
    return outputs[k] if 0 <= k < len(outputs) else None


def _bind_arguments(row: Collective, args: tuple, kwargs: dict) -> tuple:
    """``args`` and ``kwargs`` of a call of ``row``'s method, in parameter order with defaults filled;
    Python's own TypeErrors for arguments that do not fit."""
    m = row.method
    params = m.params
    name = str(row.name)
    if len(args) > len(params):
        raise TypeError(f"{name}() takes {len(params)} positional arguments but {len(args)} were given")
    values = dict(zip(params, args))  # noqa: B905 — fewer args than params is the point
    for k, v in kwargs.items():
        if k not in params:
            raise TypeError(f"{name}() got an unexpected keyword argument {k!r}")
        if k in values:
            raise TypeError(f"{name}() got multiple values for argument {k!r}")
        values[k] = v
    missing = [p for p in params if p not in values and p not in m.defaults]
    if missing:
        raise TypeError(f"{name}() missing {len(missing)} required argument(s): {', '.join(map(repr, missing))}")
    return tuple(values[p] if p in values else m.defaults[p] for p in params)


_EMPTY = MappingProxyType({})
_RESULTS = {LIST: "list({outs})", TUPLE: "tuple({outs})", ROOTS: "{outs}[{root}]"}  # :func:`returns`' kinds


def result_source(row: Collective) -> str:
    """What ``row``'s method returns (:func:`returns`), as a Python expression over the method's parameters: for a
    method generated with them (:func:`with_parameters`, a LocalCommunicator's held route)."""
    m = row.method
    root = m.params[m.slots.root] if m.slots.root >= 0 else "0"
    return _RESULTS[returns(row)].format(outs=m.params[m.slots.outputs], root=root)


def with_parameters(row: Collective, body: Callable[..., Any], *, by_slot: bool = False) -> Callable[..., Any]:
    """``row``'s method: a function with the row's own parameters and defaults that returns ``body(self, *values)``
    (the arguments in parameter order).  Python binds a call's arguments, keywords included, in C, with its own
    TypeErrors: no ``*args`` tuple, no binding of ours.

    ``by_slot``: ``body(self, inputs, outputs, root, op, extra)`` instead, the arguments by their
    :class:`~gpucomm.collectives.spec.Slots` (root 0 and op None where the method has none; ``extra`` a dict of
    the other parameters), so that the body indexes no tuple.
    """
    m = row.method
    name = str(row.name)
    params = m.params
    ins, outs, root_at = m.slots.inputs, m.slots.outputs, m.slots.root
    signature = ", ".join(f"{p}=__defaults[{p!r}]" if p in m.defaults else p for p in params)
    call = ", ".join(params)
    if by_slot:
        extra = m.slots.extra
        call = (f"{params[ins]}, {params[outs]}, {params[root_at] if root_at >= 0 else '0'}, "
                f"{params[m.slots.op] if m.slots.op >= 0 else 'None'}, "
                + ("{" + ", ".join(f"{p!r}: {p}" for p, _ in extra) + "}" if extra else "__EMPTY"))
    source = f"def {name}(self, {signature}):\n    return __body(self, {call})\n"
    space = {"__defaults": m.defaults, "__body": body, "__EMPTY": _EMPTY}
    exec(compile(source, f"<Communicator.{name}>", "exec"), space)
    return space[name]


def signed(row: Collective, method: Callable[..., Any]) -> Callable[..., Any]:
    """``method`` named, documented and signed as ``row``'s Communicator method."""
    m = row.method
    name = str(row.name)
    method.__name__ = name
    method.__qualname__ = f"Communicator.{name}"
    method.__doc__ = m.doc
    method.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
        + [inspect.Parameter(p, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                             default=m.defaults.get(p, inspect.Parameter.empty)) for p in m.params])
    return method


for _name, _row in _ROWS.items():
    setattr(Communicator, _name, Communicator._method_of(_row))
