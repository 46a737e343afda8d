"""LocalCommunicator: the Communicator over the devices of one process, on :mod:`gpucomm.comm`.

This process holds every participant, so every list argument has one tensor per device, rank is
0 and world size is 1.  Devices may repeat (``["cpu", "cpu"]``, ``[cuda:0, cuda:0]``): each entry is
a participant of its own, which is how CPU-only and single-GPU machines exercise n-way code.

A method call is checked here only for what the Communicator adds to :mod:`gpucomm.comm`'s function:
one tensor per participant, each on its participant's device, a root among them, and the shapes the
collective's row implies between outputs and inputs.  It then makes the row's own ``gpucomm.comm`` call
(``row.calls.gpucomm_comm``), whose checks, verdict cache and route choice (NCCL, torch's C++ loops,
the copy path) are comm's; :meth:`~gpucomm.communicator.base.Communicator.prepare` binds that call through
comm's prepared form of the function (``gpucomm.comm._kernels.bind``), the engine of
:func:`gpucomm.comm.prepare`.

.. note:: ``barrier`` returns at once: every participant lives in this process, so all of them have
   reached it when it is called.  ``synchronize`` waits for every CUDA device in the list.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence

import torch

from gpucomm import comm as _comm
from gpucomm.collectives import Collective
from gpucomm.collectives.spec import ROOT, Args
from gpucomm.comm import _kernels
from gpucomm.communicator.base import Communicator
from gpucomm.communicator.checks import check_held, check_root, check_shapes
from gpucomm.devices import DeviceLike, parse_devices

__all__ = ["LocalCommunicator"]

_TENSOR = torch.Tensor
_TENSOR_ONLY = {torch.Tensor}
_GET_DEVICE = torch.Tensor.get_device  # an int (-1 on the CPU): cheaper than building a torch.device


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
        # With every device 'cpu' or an indexed 'cuda' one, a tensor's get_device() (an int, no
        # torch.device built) tells its participant's device exactly; otherwise check_held compares devices.
        self._indices = ([-1 if d.index is None else d.index for d in parsed]
                         if all(d.type == "cpu" and d.index is None or d.type == "cuda" and d.index is not None
                                for d in parsed) else None)

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

    # ----- a row's call: the Communicator's checks, then gpucomm.comm's -------------------------------
    def _held(self, tensors, arg: str) -> None:
        """:func:`check_held` (same errors), its common case — n plain tensors, each on its participant's
        device — answered in C-level passes."""
        if ((type(tensors) is list or type(tensors) is tuple) and len(tensors) == self._n and self._indices
                and set(map(type, tensors)) == _TENSOR_ONLY and list(map(_GET_DEVICE, tensors)) == self._indices):
            return
        check_held(self, tensors, arg)

    def _root_entry(self, tensors, arg: str, root: int) -> None:
        """A list with one entry per participant of which only the root's is used (scatter's inputs,
        gather's outputs): the others are ignored and may be None, so only the root's is checked."""
        if ((type(tensors) is list or type(tensors) is tuple) and len(tensors) == self._n and self._indices
                and type(tensors[root]) is _TENSOR and tensors[root].get_device() == self._indices[root]):
            return
        items = check_held(self, tensors, arg, optional=True)
        if items[root] is None:
            raise TypeError(f"{arg}[{root}]: expected the root's tensor, but got None")

    def _args(self, row: Collective, values: tuple) -> Args:
        a = row.method.args(values, self._n, devices=self._devices)
        root = a.root
        if row.has_root and not (type(root) is int and 0 <= root < self._n):
            check_root(self, root)
        if a.inputs is a.outputs:
            self._held(a.inputs, "tensors")
            return a
        if row.output_buffer == ROOT:
            self._root_entry(a.outputs, "outputs", root)
        else:
            self._held(a.outputs, "outputs")
        if row.input_buffer == ROOT:
            self._root_entry(a.inputs, "inputs", root)
        else:
            self._held(a.inputs, "inputs")
        check_shapes(row, self._n, a)
        return a

    def _run(self, row: Collective, a: Args) -> None:
        inv = row.calls.gpucomm_comm(_comm, a)
        inv.fn(*inv.args, **inv.kwargs)

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
