"""LocalCommunicator: the Communicator over the devices of one process, on :mod:`gpucomm.comm`.

This process holds every participant, so every list argument has one tensor per device, rank is
0 and world size is 1.  Devices may repeat (``["cpu", "cpu"]``, ``[cuda:0, cuda:0]``): each entry is
a participant of its own, which is how CPU-only and single-GPU machines exercise n-way code.

.. note:: ``barrier`` returns at once: every participant lives in this process, so all of them have
   reached it when it is called.  ``synchronize`` waits for every CUDA device in the list.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from gpucomm import collectives as _spec
from gpucomm.collectives import ReduceOp
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

    def __repr__(self) -> str:
        return f"LocalCommunicator(devices={[str(d) for d in self._devices]})"

    # ----- who participates -------------------------------------------------------------------------
    @property
    def n(self) -> int:
        return len(self._devices)

    @property
    def rank(self) -> int:
        return 0

    @property
    def world_size(self) -> int:
        return 1

    @property
    def devices(self) -> list[torch.device]:
        return list(self._devices)

    # ----- collectives ------------------------------------------------------------------------------
    def broadcast(self, tensors: Tensors, root: int = 0) -> None:
        ts = _check_held(self, tensors, "tensors")
        others = [t for i, t in enumerate(ts) if i != _check_root(self, root)]
        if not others:
            return
        src = ts[root]
        if (_BROADCAST_OUT is not None and all(o.shape == src.shape for o in others)
                and _plain_cuda(others, [src])):
            _BROADCAST_OUT(src, others)
            return
        _comm().broadcast(src, out=others)

    def reduce(self, tensors: Tensors, root: int = 0, op: str | ReduceOp = "sum") -> None:
        ts = _check_held(self, tensors, "tensors")
        _check_avg_dtype(op, ts[0])
        _comm().reduce(ts, None, op, out=ts[_check_root(self, root)])

    def all_reduce(self, tensors: Tensors, op: str | ReduceOp = "sum") -> None:
        ts = _check_held(self, tensors, "tensors")
        _check_avg_dtype(op, ts[0])
        _comm().all_reduce(ts, op, out=ts)

    def all_gather(self, outputs: Tensors, inputs: Tensors) -> None:
        outs, ins = _check_held(self, outputs, "outputs"), _check_held(self, inputs, "inputs")
        want = _spec.get("all_gather").output_shape(ins[0].shape, self.n)
        for i, o in enumerate(outs):
            _check_shape(f"outputs[{i}]", o, want, f"n={self.n} inputs of shape {list(ins[0].shape)} "
                                                   f"concatenated along dim 0")
        _comm().all_gather(ins, 0, out=outs)

    def reduce_scatter(self, outputs: Tensors, inputs: Tensors, op: str | ReduceOp = "sum") -> None:
        outs, ins = _check_held(self, outputs, "outputs"), _check_held(self, inputs, "inputs")
        _check_avg_dtype(op, ins[0])
        want = _spec.get("reduce_scatter").output_shape(ins[0].shape, self.n)
        for i, o in enumerate(outs):
            _check_shape(f"outputs[{i}]", o, want,
                         f"chunk of {self.n} of an input of shape {list(ins[0].shape)}")
        _comm().reduce_scatter(ins, 0, op, out=outs)

    def scatter(self, outputs: Tensors, inputs: OptionalTensors, root: int = 0) -> None:
        outs = _check_held(self, outputs, "outputs")
        src = _check_held(self, inputs, "inputs", optional=True)[_check_root(self, root)]
        if src is None:
            raise TypeError(f"inputs[{root}]: expected the root's tensor, but got None")
        want = _spec.get("scatter").output_shape(src.shape, self.n)
        for i, o in enumerate(outs):
            _check_shape(f"outputs[{i}]", o, want, f"chunk of {self.n} of the root's input of shape "
                                                   f"{list(src.shape)}")
        if _SCATTER_OUT is not None and _plain_cuda(outs, [src]):
            _SCATTER_OUT(src, outs, 0, None)
            return
        _comm().scatter(src, out=outs)

    def gather(self, outputs: OptionalTensors, inputs: Tensors, root: int = 0) -> None:
        ins = _check_held(self, inputs, "inputs")
        dst = _check_held(self, outputs, "outputs", optional=True)[_check_root(self, root)]
        if dst is None:
            raise TypeError(f"outputs[{root}]: expected the root's tensor, but got None")
        _check_shape(f"outputs[{root}]", dst, _spec.get("gather").output_shape(ins[0].shape, self.n),
                     f"n={self.n} inputs of shape {list(ins[0].shape)} concatenated along dim 0")
        _comm().gather(ins, 0, out=dst)

    def all_to_all(self, outputs: Tensors, inputs: Tensors) -> None:
        outs, ins = _check_held(self, outputs, "outputs"), _check_held(self, inputs, "inputs")
        for i, (o, t) in enumerate(zip(outs, ins, strict=True)):
            _check_splits(f"inputs[{i}]", t, self.n)
            _check_shape(f"outputs[{i}]", o, tuple(t.shape), f"inputs[{i}]'s shape")
        lists = [list(t.chunk(self.n)) for t in ins]  # lists[i][j]: input i, chunk j
        _comm().all_to_all(lists, out=[list(o.chunk(self.n)) for o in outs])

    def send_recv(self, outputs: Tensors, inputs: Tensors) -> None:
        outs, ins = _check_held(self, outputs, "outputs"), _check_held(self, inputs, "inputs")
        for i, (o, t) in enumerate(zip(outs, ins, strict=True)):
            _check_shape(f"outputs[{i}]", o, tuple(t.shape), f"inputs[{i}]'s shape")
        _comm().send_recv(ins, out=outs)

    # ----- synchronisation ----------------------------------------------------------------------------
    def barrier(self) -> None:
        return None

    def synchronize(self) -> None:
        for d in dict.fromkeys(d for d in self._devices if d.type == "cuda"):
            torch.cuda.synchronize(d)
