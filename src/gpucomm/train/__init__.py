"""``gpucomm.train`` — one workload under several data-parallel strategies, checked equal and timed.

* :class:`TrainConfig` — what to compare (strategies, model, devices, batch, steps, seed).
* :func:`run_comparison` — run them (single first), compare each with single, return records.
* :mod:`gpucomm.train.strategies` — the strategies (``single``, ``dp``, ``replicated``, ``ddp``), one
  interface, a registry for more.
* :mod:`gpucomm.train.models` — built-in workloads and ``pkg.module:factory`` loading.

``gpucomm train --help`` is the command-line manual; ``docs/train.md`` the guide.  The names below are
imported lazily, so that importing :mod:`gpucomm.train.cli` to build the parser does not import torch.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["MODELS", "TOLERANCES", "Comparison", "ConfigError", "Equality", "ModelError", "TrainConfig",
           "Workload", "compare_runs", "load_workload", "run_comparison"]

_LAZY = {
    "Comparison": "gpucomm.train.compare", "Equality": "gpucomm.train.compare",
    "compare_runs": "gpucomm.train.compare", "run_comparison": "gpucomm.train.compare",
    "TOLERANCES": "gpucomm.train.config", "ConfigError": "gpucomm.train.config",
    "TrainConfig": "gpucomm.train.config",
    "MODELS": "gpucomm.train.models", "ModelError": "gpucomm.train.models", "Workload": "gpucomm.train.models",
    "load_workload": "gpucomm.train.models",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'gpucomm.train' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
