"""The typed configuration of one ``gpucomm bench`` run (parse → :class:`BenchConfig` → run).

:func:`defaults_for` gives the machine-dependent defaults (``docs/performance.md`` §7): on CUDA, 8 B
to 256 MiB ×4, 20 iterations, 5 warmups; on CPU, 8 B to 4 MiB ×8, 20 iterations, 3 warmups, so a
loaded 2-core machine finishes well within two minutes.
"""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from gpucomm.collectives import CollectiveName, ReduceOp

if TYPE_CHECKING:
    import torch

__all__ = ["DTYPES", "BenchConfig", "Defaults", "defaults_for", "parse_dtype"]

DTYPES: tuple[str, ...] = ("float32", "float16", "bfloat16", "float64", "int32", "int64")
"""The dtypes a run can measure, by torch's name (resolved to ``torch.<name>`` only when parsed, so that
``gpucomm bench --help`` imports no torch)."""
_DTYPE_ALIASES = {"float": "float32", "fp32": "float32", "half": "float16", "fp16": "float16",
                  "bf16": "bfloat16", "double": "float64", "fp64": "float64", "int": "int32",
                  "long": "int64"}


def parse_dtype(name: str) -> torch.dtype:
    """``"float32"``, ``"fp16"``, ``"bf16"``, … → a torch dtype; a clear ValueError lists the choices."""
    key = _DTYPE_ALIASES.get(name.strip().lower(), name.strip().lower())
    if key not in DTYPES:
        raise ValueError(f"--dtype: unknown dtype {name!r}; expected one of {', '.join(DTYPES)} (or 'all')")
    import torch

    return getattr(torch, key)


@dataclass(frozen=True, slots=True, kw_only=True)
class Defaults:
    """Sweep and iteration defaults for one kind of machine."""

    minbytes: int
    maxbytes: int
    stepfactor: int
    iters: int
    warmup: int
    nproc: int


def defaults_for(device_type: str) -> Defaults:
    """The defaults for ``"cuda"`` or ``"cpu"`` runs."""
    if device_type == "cuda":
        from gpucomm.devices import cuda_device_count

        return Defaults(minbytes=8, maxbytes=256 << 20, stepfactor=4, iters=20, warmup=5,
                        nproc=max(1, cuda_device_count()))
    return Defaults(minbytes=8, maxbytes=4 << 20, stepfactor=8, iters=20, warmup=3,
                    nproc=max(2, min(4, os.cpu_count() or 2)))


@dataclass(frozen=True, kw_only=True)  # no slots: frozen+slots dataclasses do not unpickle on some 3.10s
class BenchConfig:
    """Everything a run needs; checked on construction, picklable (it travels to the workers)."""

    ops: tuple[CollectiveName, ...]
    """Collectives to measure, in order."""
    backends: tuple[str, ...]
    """Backends to run (see :mod:`gpucomm.bench.backends`), baselines first within each kind."""
    sizes: tuple[int, ...]
    """Requested sizes in bytes (rounded down per op to whole chunks)."""
    dtypes: tuple[torch.dtype, ...]
    """Element types."""
    reduce_ops: tuple[ReduceOp, ...]
    """Reduction ops for the reducing collectives."""
    iters: int
    """Timed iterations per row."""
    warmup: int
    """Untimed warmup iterations per row."""
    check: int
    """Correctness-check iterations per row; 0 = no check (#wrong = -1)."""
    device_type: str
    """"cuda" or "cpu": what the numbers are."""
    devices: tuple[torch.device, ...] = ()
    """Participants of the one-process backends."""
    nproc: int = 1
    """Processes for the process-group backends when gpucomm spawns them."""
    root: int = 0
    """Root participant of rooted collectives."""
    cuda_graph: bool = False
    """Time CUDA-graph replays instead of eager launches (rows say "cuda-graph")."""
    min_busbw: float | None = None
    """Fail the run if a series' largest-size busbw is below this many GB/s."""
    timeout: float = 600.0
    """Seconds a spawned process-group phase may take before it is stopped."""
    extra: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.iters < 1:
            raise ValueError(f"--iters: expected at least 1 timed iteration, but got {self.iters}")
        if self.warmup < 0:
            raise ValueError(f"--warmup-iters: expected a non-negative count, but got {self.warmup}")
        if self.check < 0:
            raise ValueError(f"--check: expected a non-negative count (0 turns checking off), but got {self.check}")
        if self.nproc < 1:
            raise ValueError(f"--nproc: expected at least 1 process, but got {self.nproc}")
        if isinstance(self.timeout, bool) or not (math.isfinite(self.timeout) and self.timeout > 0):
            raise ValueError(f"--timeout: expected a finite number of seconds > 0, such as 600, "
                             f"but got {self.timeout!r}")
        if self.min_busbw is not None and not self.min_busbw >= 0:
            raise ValueError(f"--min-busbw: expected a non-negative GB/s figure, but got {self.min_busbw}")
        if self.root < 0:
            raise ValueError(f"--root: expected a non-negative participant index, but got {self.root}")
        if self.cuda_graph and self.device_type != "cuda":
            raise ValueError("--cuda-graph: CUDA graphs need CUDA devices, but this run is on CPU; drop the flag")

    @property
    def timing(self) -> str:
        """The timing mode every row of this run uses."""
        from gpucomm.bench import timing

        if self.device_type != "cuda":
            return timing.PERF_COUNTER
        return timing.CUDA_GRAPH if self.cuda_graph else timing.CUDA_EVENTS

    def params(self) -> dict:
        """The run parameters as JSON-ready data (the env record's ``extra``)."""
        return {
            "ops": [str(o) for o in self.ops], "backends": list(self.backends), "sizes": list(self.sizes),
            "dtypes": [str(d).removeprefix("torch.") for d in self.dtypes],
            "reduce_ops": [str(r) for r in self.reduce_ops], "iters": self.iters, "warmup": self.warmup,
            "check": self.check, "device_type": self.device_type, "devices": [str(d) for d in self.devices],
            "nproc": self.nproc, "root": self.root, "timing": self.timing, "min_busbw": self.min_busbw,
            **self.extra,
        }

    def replace(self, **changes) -> BenchConfig:
        return dataclasses.replace(self, **changes)
