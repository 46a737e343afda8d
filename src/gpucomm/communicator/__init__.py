"""The Communicator: one interface over one-process (:mod:`gpucomm.comm`) and many-process (:mod:`gpucomm.dist`) collectives.

* :mod:`~gpucomm.communicator.base` — the abstract :class:`Communicator`: its collective methods, one
  per collective row that declares one, and :meth:`Communicator.prepare` (check once, rerun unchecked);
* :mod:`~gpucomm.communicator.checks` — the argument checks both implementations share;
* :mod:`~gpucomm.communicator.local` — :class:`LocalCommunicator`, every device of this process,
  on gpucomm.comm;
* :mod:`~gpucomm.communicator.process_group` — :class:`ProcessGroupCommunicator`, one participant
  per rank, on gpucomm.dist.

The base imports neither implementation; this package's ``__init__`` gathers all three.
"""

from gpucomm.communicator.base import Communicator, OptionalTensors, Prepared, Tensors, methods
from gpucomm.communicator.local import LocalCommunicator
from gpucomm.communicator.process_group import ProcessGroupCommunicator

__all__ = ["Communicator", "LocalCommunicator", "OptionalTensors", "Prepared", "ProcessGroupCommunicator",
           "Tensors", "methods"]
