"""LocalCommunicator: the Communicator over the devices of one process, on :mod:`gpucomm.comm`.

This process holds every participant, so every list argument has one tensor per device, rank is
0 and world size is 1.  Devices may repeat (``["cpu", "cpu"]``, ``[cuda:0, cuda:0]``): each entry is
a participant of its own, which is how CPU-only and single-GPU machines exercise n-way code.

A method call is checked here only for what the Communicator adds to :mod:`gpucomm.comm`: one tensor per
participant, each on its participant's device (one C-level pass over the tensors' device indices), a root
among them, and the shapes the collective's row implies between outputs and inputs.  It then runs
gpucomm.comm's form of the row (``gpucomm.comm._kernels.local_form``, registered by the kernel module that
implements it), which makes every check of the gpucomm.comm function the row calls and chooses the route
(NCCL, torch's C++ loops, the copy path).  Each method's body is built once, when the class is created, as a
closure over the row's facts, behind a method with the row's own parameters (Python binds a call's arguments in
C); what depends on the devices (their indices, whether they repeat) is decided once per communicator.

Plain broadcast and scatter are, on each communicator, their **held route** (``gpucomm.comm._kernels.held_route``,
made once per communicator and set as the instance's method, so that a plain call is one Python call): torch's
C++ loop, taken when the call views the storages of a call checked before — the participants' devices and the
storages' being distinct are facts of the storage objects, which the route remembers weakly — so that such a
call costs one storage read per tensor (and scatter one element count per chunk) beyond torch's own
(``benchmarks/host_instructions.py``).  Anything else falls through to the class's method (the checks above,
unchanged): the route takes only calls they accept.  :meth:`~gpucomm.communicator.base.Communicator.prepare` binds the row's own
gpucomm.comm call (``row.calls.gpucomm_comm``) through comm's prepared form of the function
(``gpucomm.comm._kernels.bind``), the engine of :func:`gpucomm.comm.prepare`.

.. note:: ``barrier`` returns at once: every participant lives in this process, so all of them have
   reached it when it is called.  ``synchronize`` waits for every CUDA device in the list.
"""

from __future__ import annotations

import inspect
import operator
from collections.abc import Callable, Sequence
from typing import Any

import torch

from gpucomm import comm as _comm
from gpucomm.collectives import COLLECTIVES, Collective
from gpucomm.collectives.spec import CHUNK, CHUNK_COUNT, ROOT, Args
from gpucomm.comm import _kernels
from gpucomm.communicator.base import (
    LIST,
    TUPLE,
    Communicator,
    result_source,
    returns,
    signed,
    with_parameters,
)
from gpucomm.communicator.checks import check_held, check_root, check_shapes
from gpucomm.devices import DeviceLike, parse_devices

__all__ = ["LocalCommunicator"]

_DEVICE = operator.attrgetter("device")
_SHAPE = operator.attrgetter("shape")


def _on_devices(tensors: Any, devices: list[torch.device], root: int = -1) -> bool:
    """Whether ``tensors`` is a list of one tensor per participant, each on its participant's device
    (``root >= 0``: only the root's entry is used, and asked), in one C-level pass over their devices; False,
    never an error, for anything else (the caller's checks then name it)."""
    if not ((type(tensors) is list or type(tensors) is tuple) and len(tensors) == len(devices)):
        return False
    try:
        if root < 0:
            return list(map(_DEVICE, tensors)) == devices
        return tensors[root].device == devices[root]
    except AttributeError:  # an entry that is not a tensor
        return False


def _shape_rule(row: Collective) -> Callable[[int, Any, Any, int], bool] | None:
    """``rule(n, inputs, outputs, root)``: whether one call's held tensors have the shapes ``row`` implies
    (:func:`check_shapes` accepts exactly these, and names what the rule refuses), asked in one pass;
    None where the row relates no shapes (in place, or a method with its own split sizes)."""
    slots = row.method.slots
    if slots.inputs == slots.outputs or slots.extra:
        return None
    if row.input_buffer == CHUNK or row.output_buffer == CHUNK:
        split = row.output_buffer == CHUNK  # an output is one of n chunks of an input; else n inputs
        from_root, to_root = row.input_buffer == ROOT, row.output_buffer == ROOT

        def rule(n: int, ins: Any, outs: Any, root: int) -> bool:
            # torch.Size compares as a tuple, in C: one list.count over the outputs' shapes, then one
            # output against the input, beats comparing each output with a tuple built here
            s = (ins[root] if from_root else ins[0]).shape
            if to_root:
                shapes, o = None, outs[root].shape
            else:
                shapes = list(map(_SHAPE, outs))
                o = shapes[0]
            nd = len(s)
            if not nd or len(o) != nd or nd > 1 and o[1:] != s[1:] or shapes is not None and shapes.count(o) != n:
                return False  # (slicing a torch.Size builds one: 1-d buffers, the usual, skip it)
            return o[0] * n == s[0] if split else o[0] == s[0] * n

        return rule
    chunked = row.count_unit == CHUNK_COUNT  # the input splits into n chunks (all_to_all)

    def same(n: int, ins: Any, outs: Any, root: int) -> bool:
        for o, t in zip(outs, ins):  # noqa: B905 — the lengths were checked (n each)
            s = t.shape
            if o.shape != s or chunked and (not s or s[0] % n):
                return False
        return True

    return same


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
        kinds = set(parsed)
        self._held_by = _kernels.Held(tuple(parsed), one_device=list(parsed) if len(kinds) == 1 else None,
                                      distinct=len(kinds) == len(parsed))
        self._route()

    def _route(self) -> None:
        """Give this communicator its held routes: for each row that has one, the route *is* this instance's method
        (an instance attribute, so a plain call is one Python call), with the row's parameters, falling back to the
        class's method (the checks, then gpucomm.comm's form) for any call it does not take.  A subclass that
        defines the method itself keeps its own."""
        cls = type(self)
        for name in _kernels.held_routes():
            method = getattr(cls, name)
            if not getattr(method, "_built_from_row", False):  # a subclass's own method
                continue
            row = COLLECTIVES[name]
            route = _kernels.held_route(name, self._held_by, row.method.params, row.method.defaults,
                                        result_source(row), method.__get__(self, cls))
            if route is not None:
                route.__qualname__, route.__doc__ = f"{cls.__name__}.{name}", method.__doc__
                setattr(self, name, route)

    def __getstate__(self) -> dict:
        # the held routes are closures over what this process remembered (and over this object): a copy makes its own
        return {k: v for k, v in self.__dict__.items() if k not in _kernels.held_routes()}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._route()

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

    # ----- a row's call: the Communicator's checks, then gpucomm.comm's form of the row ---------------
    def _held(self, tensors: Any, arg: str, root: int = -1) -> None:
        """:func:`check_held`'s errors for a list that :func:`_on_devices` did not vouch for.  ``root >= 0``: a
        list of which only the root's entry is used (scatter's inputs, gather's outputs); the others are
        ignored and may be None."""
        if _on_devices(tensors, self._devices, root):
            return
        items = check_held(self, tensors, arg, optional=root >= 0)
        if root >= 0 and items[root] is None:
            raise TypeError(f"{arg}[{root}]: expected the root's tensor, but got None")

    def _check(self, row: Collective, ins: Any, outs: Any, root: int) -> None:
        """The Communicator's checks of one call of ``row``'s method (``ins is outs``: in place), with their
        errors: what :meth:`_method_of`'s methods run when their one-pass tests say no, and what prepare runs."""
        if row.has_root and not (type(root) is int and 0 <= root < self._n):
            check_root(self, root)
        if ins is outs:
            self._held(ins, "tensors")
            return
        self._held(outs, "outputs", root if row.output_buffer == ROOT else -1)
        self._held(ins, "inputs", root if row.input_buffer == ROOT else -1)
        if not row.method.slots.extra:  # a method with its own split sizes: gpucomm.comm checks them
            check_shapes(row, self._n, ins, outs, root)

    @classmethod
    def _method_of(cls, row: Collective) -> Callable[..., Any]:
        """``row``'s method: the Communicator's checks in one pass each (:meth:`_check` names what they refuse) and
        gpucomm.comm's form of the row; everything that depends only on the row is decided here, once.  (A row with a
        held route runs this method only for the calls its route does not take: :meth:`_route`.)"""
        form = _kernels.local_forms()[str(row.name)]
        in_place, has_root, kind = row.method.slots.inputs == row.method.slots.outputs, row.has_root, returns(row)
        root_in, root_out = row.input_buffer == ROOT, row.output_buffer == ROOT
        shapes = _shape_rule(row)

        def body(self: LocalCommunicator, inputs: Any, outputs: Any, root: Any, op: Any, extra: Any) -> Any:
            n, devices = self._n, self._devices
            if not ((not has_root or type(root) is int and 0 <= root < n)
                    and (_on_devices(inputs, devices) if in_place else
                         _on_devices(outputs, devices, root if root_out else -1)
                         and _on_devices(inputs, devices, root if root_in else -1)
                         and (shapes is None or shapes(n, inputs, outputs, root)))):
                self._check(row, inputs, outputs, root)  # names what the one-pass tests refused
            form(self._held_by, inputs, outputs, root, op, extra)
            if kind == LIST:
                return list(outputs)
            if kind == TUPLE:
                return tuple(outputs)
            return outputs[root]

        method = signed(row, with_parameters(row, body, by_slot=True))
        method._built_from_row = True  # type: ignore[attr-defined]  # (not a subclass's own: _route)
        return method

    def _args(self, row: Collective, values: tuple) -> Args:
        a = row.method.args(values, self._n, devices=self._devices)
        self._check(row, a.inputs, a.outputs, a.root)
        return a

    def _bind(self, row: Collective, a: Args) -> Callable[[], object]:
        inv = row.calls.gpucomm_comm(_comm, a)
        arguments = inspect.signature(inv.fn).bind(*inv.args, **inv.kwargs).arguments
        first = next(iter(arguments))  # the function's inputs; out= is the prepared form's outputs
        options = {k: v for k, v in arguments.items() if k not in (first, "out")}
        run, _, _ = _kernels.bind(inv.name, arguments[first], arguments.get("out"), **options)
        return run

    # ----- synchronisation ----------------------------------------------------------------------------
    def barrier(self) -> None:
        return None

    def synchronize(self) -> None:
        for d in dict.fromkeys(d for d in self._devices if d.type == "cuda"):
            torch.cuda.synchronize(d)
