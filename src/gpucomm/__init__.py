"""gpucomm: move tensors between GPUs, measure it honestly, choose how to train on several of them.

* :mod:`gpucomm.comm` — one process, many devices: a drop-in for ``torch.cuda.comm`` plus the
  collectives it lacks; runs on CPU tensors too.
* :mod:`gpucomm.dist` — the same collectives across processes on ``torch.distributed``.
* :class:`Communicator` — one interface over both (:class:`LocalCommunicator`,
  :class:`ProcessGroupCommunicator`).
* :mod:`gpucomm.parallel` — data parallel for your own training loop (``ReplicatedDataParallel``).

Submodules are imported lazily, so ``import gpucomm`` stays cheap and a CLI subcommand loads only
what it uses.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

__all__ = ["Communicator", "LocalCommunicator", "ProcessGroupCommunicator", "comm", "dist", "parallel"]

_LAZY = {
    "Communicator": ("gpucomm.communicator", "Communicator"),
    "LocalCommunicator": ("gpucomm.communicator", "LocalCommunicator"),
    "ProcessGroupCommunicator": ("gpucomm.communicator", "ProcessGroupCommunicator"),
    "comm": ("gpucomm.comm", None),
    "dist": ("gpucomm.dist", None),
    "parallel": ("gpucomm.parallel", None),
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'gpucomm' has no attribute {name!r}")
    module_name, attr = _LAZY[name]
    module = importlib.import_module(module_name)
    value = module if attr is None else getattr(module, attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
