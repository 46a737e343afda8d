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
from collections.abc import Callable, Sequence

import torch

from gpucomm._validate import fail_type, fail_value
from gpucomm.collectives import ReduceOp

__all__ = ["COLLECTIVES", "Communicator", "OptionalTensors", "Prepared", "Tensors"]

Tensors = Sequence[torch.Tensor]
OptionalTensors = Sequence[torch.Tensor | None]
Prepared = Callable[[], None]
"""A prepared collective: call it to rerun the collective on the tensors it was prepared with."""

COLLECTIVES = ("broadcast", "reduce", "all_reduce", "all_gather", "reduce_scatter", "scatter", "gather",
               "all_to_all", "send_recv")
"""The collective methods :meth:`Communicator.prepare` accepts, by name."""


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

    # ----- prepared collectives ---------------------------------------------------------------------
    def prepare(self, op: str, /, tensors, *args, graph: bool = False, **kwargs) -> Prepared:
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
        if op not in COLLECTIVES:
            raise fail_value("op", f"one of {list(COLLECTIVES)}", repr(op), "name a Communicator collective")
        if not isinstance(graph, bool):
            raise fail_type("graph", "a bool", graph)
        run = self._prepare(op, tensors, *args, **kwargs)
        if graph:
            from gpucomm.comm._kernels import capture  # deferred: comm is the heavier package

            return capture(run, self.devices)
        return run

    @abc.abstractmethod
    def _prepare(self, op: str, /, tensors, *args, **kwargs) -> Prepared:
        """The method ``op``'s checks on these arguments, then a callable that reruns its work."""

