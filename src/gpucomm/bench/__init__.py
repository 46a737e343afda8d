"""``gpucomm bench``: nccl-tests' method for torch.cuda.comm, gpucomm.comm, torch.distributed and gpucomm.dist.

* :mod:`~gpucomm.bench.sizes` — K/M/G sizes and the geometric sweep (``-b -e -f``).
* :mod:`~gpucomm.bench.metrics` — median/p99, algbw/busbw (through :mod:`gpucomm.collectives`), speedup.
* :mod:`~gpucomm.bench.check` — inputs from a formula, expected outputs computed independently, ``#wrong``.
* :mod:`~gpucomm.bench.buffers` — a case's buffers, from the collective's row.
* :mod:`~gpucomm.bench.backends` — the backends compared and all their attributes (no torch import).
* :mod:`~gpucomm.bench.adapters` — one runtime adapter per backend: the row's call, plain or prepared.
* :mod:`~gpucomm.bench.timing` — cuda-events, cuda-graph and perf-counter timers.
* :mod:`~gpucomm.bench.runner` — plan the points; warm up, time and check each one.
* :mod:`~gpucomm.bench.pg` — the process-group phase (spawned ranks or torchrun).
* :mod:`~gpucomm.bench.session` — one run: records, live view, report, exit status.
* :mod:`~gpucomm.bench.cli` — the ``gpucomm bench`` subcommand.

Every metric is defined in ``docs/performance.md`` before this code uses it.
"""

__all__: list[str] = []
