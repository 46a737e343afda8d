"""``gpucomm.train`` — one workload under several data-parallel strategies, checked equal and timed.

* :class:`TrainConfig` — what to compare (strategies, model, devices, batch, steps, seed).
* :func:`run_comparison` — run them (single first), compare each with single, return records.
* :mod:`gpucomm.train.strategies` — the strategies (``single``, ``dp``, ``replicated``, ``ddp``), one
  interface, a registry for more.
* :mod:`gpucomm.train.models` — built-in workloads and ``pkg.module:factory`` loading.

``gpucomm train --help`` is the command-line manual; ``docs/train.md`` the guide.
"""

from __future__ import annotations

from gpucomm.train.compare import Comparison, Equality, compare_runs, run_comparison
from gpucomm.train.config import TOLERANCES, ConfigError, TrainConfig
from gpucomm.train.models import MODELS, ModelError, Workload, load_workload

__all__ = ["MODELS", "TOLERANCES", "Comparison", "ConfigError", "Equality", "ModelError", "TrainConfig",
           "Workload", "compare_runs", "load_workload", "run_comparison"]
