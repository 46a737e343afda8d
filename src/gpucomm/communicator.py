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

Operations are enqueued on each device's current stream and return without synchronising the host
(on CPU they complete before returning); :meth:`synchronize` waits for them.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence

import torch

from gpucomm._validate import check_tensor_list, describe, fail_type, fail_value
from gpucomm.collectives import ReduceOp

__all__ = ["Communicator", "LocalCommunicator", "ProcessGroupCommunicator"]

Tensors = Sequence[torch.Tensor]
OptionalTensors = Sequence[torch.Tensor | None]


class Communicator(abc.ABC):
    """The collective interface shared by one-process and many-process implementations."""

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

    # ----- collectives ------------------------------------------------------------------------------
    @abc.abstractmethod
    def broadcast(self, tensors: Tensors, root: int = 0) -> None:
        """Copy the root's tensor into every tensor, in place."""

    @abc.abstractmethod
    def reduce(self, tensors: Tensors, root: int = 0, op: str | ReduceOp = "sum") -> None:
        """Reduce every tensor into the root's tensor, in place; other tensors are left as they were."""

    @abc.abstractmethod
    def all_reduce(self, tensors: Tensors, op: str | ReduceOp = "sum") -> None:
        """Reduce every tensor and write the result into all of them, in place."""

    @abc.abstractmethod
    def all_gather(self, outputs: Tensors, inputs: Tensors) -> None:
        """Concatenate every participant's input along dim 0 into every output."""

    @abc.abstractmethod
    def reduce_scatter(self, outputs: Tensors, inputs: Tensors, op: str | ReduceOp = "sum") -> None:
        """Reduce the inputs; participant i's output gets chunk i (of n, along dim 0) of the result."""

    @abc.abstractmethod
    def scatter(self, outputs: Tensors, inputs: OptionalTensors, root: int = 0) -> None:
        """Participant i's output gets chunk i (of n, along dim 0) of the root's input."""

    @abc.abstractmethod
    def gather(self, outputs: OptionalTensors, inputs: Tensors, root: int = 0) -> None:
        """The root's output gets every participant's input concatenated along dim 0."""

    @abc.abstractmethod
    def all_to_all(self, outputs: Tensors, inputs: Tensors) -> None:
        """Chunk j of participant i's input lands as chunk i of participant j's output."""

    @abc.abstractmethod
    def send_recv(self, outputs: Tensors, inputs: Tensors) -> None:
        """Each participant i sends its input to (i+1) mod n and receives into its output from (i-1) mod n."""

    @abc.abstractmethod
    def barrier(self) -> None:
        """Return once every participant has reached the barrier."""

    @abc.abstractmethod
    def synchronize(self) -> None:
        """Wait until every operation this process enqueued has finished on its devices."""


# ----- checks both implementations share ---------------------------------------------------------------
def _same_device(t: torch.Tensor, device: torch.device) -> bool:
    return t.device.type == device.type and (device.index is None or t.device.index == device.index)


def _check_held(comm: Communicator, tensors, arg: str, *, optional: bool = False) -> list:
    """One tensor per held participant, each on its participant's device (``None`` allowed if optional)."""
    if optional:
        if isinstance(tensors, torch.Tensor) or not isinstance(tensors, Sequence):
            raise fail_type(arg, "a sequence with one tensor (or None) per held participant", tensors,
                            "wrap a single tensor in a list: [t]")
        items = list(tensors)
    else:
        items = check_tensor_list(tensors, arg)
    devices = comm.devices
    if len(items) == len(devices) and all(  # the common case, checked in one pass of C-level compares
            type(t) is torch.Tensor and t.device == d for t, d in zip(items, devices)):  # noqa: B905
        return items
    if len(items) != len(devices):
        raise fail_value(arg, f"{len(devices)} tensor(s), one per participant this process holds "
                              f"({[str(d) for d in devices]})", f"{len(items)}")
    for i, (t, d) in enumerate(zip(items, devices, strict=True)):
        if t is None:
            if not optional:
                raise fail_type(f"{arg}[{i}]", "a torch.Tensor", t)
            continue
        if not isinstance(t, torch.Tensor):
            raise fail_type(f"{arg}[{i}]", "a torch.Tensor or None", t)
        if not _same_device(t, d):
            raise fail_value(f"{arg}[{i}]", f"a tensor on {d} (participant {comm.participants[i]}'s device)",
                             describe(t), f"move it with .to('{d}')")
    return items


def _check_root(comm: Communicator, root: int, arg: str = "root") -> int:
    if isinstance(root, bool) or not isinstance(root, int):
        raise fail_type(arg, "an int participant index", root)
    if not 0 <= root < comm.n:
        raise fail_value(arg, f"a participant index in [0, {comm.n})", f"{root}")
    return root


def _check_shape(arg: str, t: torch.Tensor, expected: tuple[int, ...], why: str) -> None:
    if tuple(t.shape) != tuple(expected):
        raise fail_value(arg, f"shape {list(expected)} ({why})", f"shape {list(t.shape)}",
                         "allocate it with that shape")


def _check_splits(arg: str, t: torch.Tensor, n: int) -> None:
    if t.dim() == 0 or t.shape[0] % n:
        raise fail_value(arg, f"a tensor whose dim 0 splits into n={n} equal chunks", describe(t),
                         f"pad or trim dim 0 to a multiple of {n}")


def _check_avg_dtype(op: str | ReduceOp, t: torch.Tensor) -> None:
    from gpucomm.collectives import parse_op

    if parse_op(op) is ReduceOp.AVG and not (t.is_floating_point() or t.is_complex()):
        raise fail_value("op", "a floating-point tensor for op='avg'", f"dtype {t.dtype}",
                         "use op='sum' and divide yourself, or cast to a float dtype")


from gpucomm._communicator_local import LocalCommunicator  # noqa: E402 — they subclass Communicator
from gpucomm._communicator_pg import ProcessGroupCommunicator  # noqa: E402
