"""ProcessGroupCommunicator: the Communicator over a torch.distributed process group, one participant per rank.

Each rank holds one participant (its own device: ``cuda:LOCAL_RANK`` under NCCL, ``cpu`` under gloo),
so every list argument has length 1 and participant indices are group ranks.  A method call is checked
here (one tensor on this rank's device, a root of the group, the shapes the row implies), then made as
the collective's row says :mod:`gpucomm.dist` makes it (``row.calls.gpucomm_dist``: broadcast, reduce,
all_reduce, all_gather_into_tensor, reduce_scatter_tensor, scatter, gather, all_to_all_single, one
``batch_isend_irecv`` for send_recv), on this communicator's group; ``prepare`` hands the same call to
:func:`gpucomm.dist.prepare`.

.. note:: ``op="avg"`` is native on NCCL and a sum followed by a division on gloo (see
   :mod:`gpucomm.dist`); with power-of-two world sizes and exactly representable sums both are exact.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.distributed as td

from gpucomm import dist as gd
from gpucomm.collectives import Collective
from gpucomm.collectives.spec import ROOT, Args
from gpucomm.communicator.base import Communicator
from gpucomm.communicator.checks import check_held, check_root, check_shapes
from gpucomm.devices import DeviceLike, parse_device

__all__ = ["ProcessGroupCommunicator"]


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
        self._ranks = None if group is None else td.get_process_group_ranks(group)  # participant -> global rank
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

    def _root(self, root: int, arg: str = "root") -> int:
        """``root`` checked (``check_root``'s errors) and turned into a global rank."""
        if type(root) is not int or not 0 <= root < self._world:  # the common case costs two compares
            check_root(self, root, arg)
        return root if self._ranks is None else self._ranks[root]

    def _held(self, tensors, arg: str, optional: bool) -> None:
        if type(tensors) is list and len(tensors) == 1:  # the common case, checked cheaply
            t = tensors[0]
            if type(t) is torch.Tensor and t.device == self._device:
                return
        check_held(self, tensors, arg, optional=optional)

    # ----- a row's call: the Communicator's checks, then gpucomm.dist's --------------------------------
    def _args(self, row: Collective, values: tuple) -> Args:
        a = row.method.args(values, self._world, rank=self._rank, devices=[self._device], ranks=self._ranks)
        root = a.root
        if row.has_root and not (type(root) is int and 0 <= root < self._world):
            check_root(self, root)
        if a.inputs is a.outputs:
            self._held(a.inputs, "tensors", False)
            return a
        mine = root == self._rank
        scatter, gather = row.input_buffer == ROOT, row.output_buffer == ROOT
        self._held(a.outputs, "outputs", gather and not mine)
        self._held(a.inputs, "inputs", scatter and not mine)
        if not a.extra:  # a method with its own split sizes relates no shapes here (gpucomm.dist checks them)
            check_shapes(row, self._world, a.inputs, a.outputs, root, self._rank)
        return a

    def _run(self, row: Collective, a: Args) -> None:
        inv = row.calls.gpucomm_dist(gd, a)
        inv.fn(*inv.args, group=self._group, **inv.kwargs)

    def _bind(self, row: Collective, a: Args) -> Callable[[], object]:
        inv = row.calls.gpucomm_dist(gd, a)
        return gd.prepare(inv.name, *inv.args, group=self._group, **inv.kwargs)

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
