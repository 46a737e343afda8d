"""``TrainConfig``: the typed configuration of one ``gpucomm train`` comparison.

Parse → typed config → run: the CLI turns flags into a :class:`TrainConfig`; its ``__post_init__``
checks everything that can be checked before a model is built (names, counts, divisibility), so a
usage error costs nothing and says how to fix it.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path

import torch

from gpucomm.devices import cuda_available, cuda_device_count, default_devices, parse_devices
from gpucomm.train.defaults import (
    BF16_AUTOCAST,
    DEFAULT_GLOBAL_BATCH,
    DEFAULT_MODELS,
    DEFAULT_STEPS,
    DEFAULT_STRATEGIES,
    FP32,
    OPTIMIZERS,
    PRECISIONS,
    RESOLVED_PRECISIONS,
)

__all__ = ["DEFAULT_MODELS", "OPTIMIZERS", "PRECISIONS", "TOLERANCES", "ConfigError", "TrainConfig",
           "check_out_dir", "default_out_dir", "process_limit"]


TOLERANCES: dict[str, float] = {FP32: 1e-5, BF16_AUTOCAST: 3e-2}
"""Default relative tolerance of ``--assert-equal`` per precision.

fp32: strategies differ only in summation order (a batch split across devices, gradients averaged
by a reduction), which moves fp32 results by a few ulps (~1e-7) per step; 1e-5 leaves room for
50 steps of that and nothing more.  bf16 autocast: a different per-device batch changes matmul
shapes and so kernels and accumulation order, and bf16 keeps 8 significant bits (relative rounding
unit roundoff 2^-8 ≈ 3.9e-3); AdamW turns small gradient differences into parameter differences of order lr per
step.  3e-2 accepts that noise and still catches a missed all-reduce or a wrong shard, which move
the loss by far more within a few steps.  (AdamW is invariant to a constant gradient factor, so a
wrong averaging factor is caught only with ``optimizer="sgd"``; the tests do that.)
"""


class ConfigError(ValueError):
    """A configuration that cannot run: a usage error (``gpucomm train`` exits 2)."""


def default_out_dir() -> Path:
    """``./gpucomm-results/train-<UTC yyyymmdd-hhmmss>-<pid>/``, not created (:func:`gpucomm.records.new_run_dir`)."""
    from gpucomm.records import new_run_dir

    return new_run_dir("train", create=False)


_RANK_BYTES = 512 << 20
"""Host memory one extra training process costs at least (it imports torch: ~0.4 GiB resident)."""


def process_limit() -> int:
    """The most local processes ``--nproc`` may ask for without ``--allow-many-procs``.

    Four per CPU core (CPU ranks time-share the cores; more only measures the scheduler) and no more
    than the available memory holds at :data:`_RANK_BYTES` each.
    """
    cores = os.cpu_count() or 1
    limit = 4 * cores
    try:
        available = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        limit = min(limit, max(1, available // _RANK_BYTES))
    except (ValueError, OSError, AttributeError):  # no sysconf here: the core limit alone
        pass
    return limit


def check_out_dir(out: Path) -> None:
    """Raise :class:`ConfigError` unless ``out`` can become a results directory; creates nothing.

    ``out`` must be a directory already, or not exist with its nearest existing ancestor a writable
    directory (a regular file anywhere on the path is refused).  The directory itself is made only
    when the first row is written, so a run that fails before then leaves nothing behind.
    """
    path = Path(out)
    if path.exists():
        if not path.is_dir():
            raise ConfigError(f"--out {str(path)!r}: expected a directory, but it is a file; choose another path")
        if not os.access(path, os.W_OK | os.X_OK):
            raise ConfigError(f"--out {str(path)!r}: the directory is not writable; choose another path")
        return
    for parent in path.absolute().parents:
        if parent.exists():
            if not parent.is_dir():
                raise ConfigError(f"--out {str(path)!r}: {str(parent)!r} is a file, not a directory; "
                                  f"choose a path under a directory")
            if not os.access(parent, os.W_OK | os.X_OK):
                raise ConfigError(f"--out {str(path)!r}: cannot create it under {str(parent)!r} (not writable); "
                                  f"choose a writable directory")
            return


@dataclass(kw_only=True, slots=True)
class TrainConfig:
    """One comparison: which strategies, on which model, devices and batch.

    Every strategy runs with the same seed, initial weights, data and global batch.
    """

    strategies: tuple[str, ...] = DEFAULT_STRATEGIES
    """Strategy names, run in this order; ``single`` is added first when missing (it is the baseline).
    Names are checked against the registry by :func:`gpucomm.train.requirements.resolve` (not here: the config
    does not import the strategies, which import it)."""
    model: str | None = None
    """Built-in model name or ``pkg.module:factory`` (None: :data:`DEFAULT_MODELS` for the device type;
    ``model_defaulted`` then says so)."""
    steps: int | None = None
    """Optimizer steps per strategy, warmup included (None: :data:`~gpucomm.train.defaults.DEFAULT_STEPS`
    for the device type)."""
    warmup_steps: int = 5
    """Leading steps left out of the timing statistics (they still count for equality)."""
    global_batch: int | None = None
    """Samples per optimizer step, over all devices; must divide by each strategy's device count (None:
    :data:`~gpucomm.train.defaults.DEFAULT_GLOBAL_BATCH` for the device type)."""
    seq_len: int | None = None
    """Override the built-in GPT's context length (None: the model's own)."""
    devices: list[torch.device] = field(default_factory=list)
    """Devices for dp and replicated; ``single`` uses the first, ddp one process per distinct device
    (CUDA) or per entry (CPU).  Empty: every visible GPU, or two CPU devices without one."""
    nproc: int | None = None
    """Processes of a local launch for strategies that run in several (ddp: its world size, one device
    per process; replicated: N processes each driving ``len(devices) / N`` devices).  None: ddp one per
    device, replicated one process.  At most :func:`process_limit` unless ``allow_many_procs``."""
    allow_many_procs: bool = False
    """Let ``nproc`` exceed :func:`process_limit` (for experts who know the machine holds them)."""
    graphs: bool = False
    """Capture each replica's step in CUDA graphs and replay it (``single`` and ``replicated``; CUDA
    only): the host then launches a step with one call per graph instead of one per kernel."""
    seed: int = 0
    """Seed of the initial weights and of every step's batch."""
    lr: float = 3e-4
    """Learning rate."""
    optimizer: str = "adamw"
    """"adamw" (fused on CUDA; what people train with) or "sgd" (plain SGD: its update is linear in the
    gradient, so a wrong averaging factor — which AdamW's scale invariance hides — shows at once)."""
    precision: str = "auto"
    """"auto" (bf16 autocast on CUDA, fp32 on CPU), "fp32" or "bf16" (autocast; CUDA only)."""
    bucket_cap_mb: float = 25.0
    """Gradient bucket size for replicated and ddp, MiB (DDP's default)."""
    first_bucket_mb: float = 1.0
    """Size of the first (last-produced) gradient bucket for replicated, MiB (DDP's 1 MiB)."""
    replicated_threads: bool = True
    """replicated: run each replica's forward/backward in its own Python thread (False: one after
    another in the calling thread; CUDA work is asynchronous either way)."""
    assert_equal: bool = False
    """Fail (exit 1) unless every strategy matches single within ``tolerance``."""
    tolerance: float | None = None
    """Relative tolerance for the equality check (None: :data:`TOLERANCES` for the precision)."""
    out: Path | None = None
    """Result directory (None: :func:`default_out_dir`)."""
    timeout: float = 600.0
    """Seconds a strategy that runs in several processes (ddp) may take once its processes have their
    process group (start-up gets at least 60 s of its own); then its ranks are stopped and its row fails
    naming the rank that hung.  Also the process group's own timeout under torchrun/SLURM."""

    model_defaulted: bool = field(default=False, init=False)
    """True when ``model`` was not given and :data:`DEFAULT_MODELS` chose it."""

    def __post_init__(self) -> None:
        self._check_strategies()
        if not self.devices:
            self.devices = default_devices(None if cuda_available() else 2)
        self.devices = parse_devices(self.devices, arg="--devices")
        types = {d.type for d in self.devices}
        if len(types) > 1:
            raise ConfigError(f"--devices: expected devices of one type, but got {[str(d) for d in self.devices]}; "
                             f"use only CUDA devices or only 'cpu'")
        self._check_devices_exist()
        if self.steps is None:
            self.steps = DEFAULT_STEPS[self.device_type]
        if self.global_batch is None:
            self.global_batch = DEFAULT_GLOBAL_BATCH[self.device_type]
        self._check_counts()
        if self.optimizer not in OPTIMIZERS:
            raise ConfigError(f"--optimizer: expected one of {', '.join(OPTIMIZERS)}, but got {self.optimizer!r}")
        if self.precision not in PRECISIONS:
            raise ConfigError(f"--precision: expected one of {', '.join(PRECISIONS)}, but got {self.precision!r}")
        if self.precision == "bf16" and self.device_type != "cuda":
            raise ConfigError("--precision bf16: autocast runs only on CUDA here; use --precision fp32 on CPU")
        if self.global_batch % len(self.devices):
            raise ConfigError(f"--global-batch {self.global_batch} does not divide by the {len(self.devices)} "
                             f"devices {[str(d) for d in self.devices]}; choose a multiple of "
                             f"{len(self.devices)}")
        if isinstance(self.timeout, bool) or not isinstance(self.timeout, int | float) \
                or not (math.isfinite(self.timeout) and self.timeout > 0):
            raise ConfigError(f"--timeout: expected a finite number of seconds > 0, such as 600, "
                              f"but got {self.timeout!r}")
        if self.tolerance is not None and not self.tolerance > 0:
            raise ConfigError(f"--tolerance: expected > 0, but got {self.tolerance}")
        if self.graphs and self.device_type != "cuda":
            raise ConfigError("--graphs: CUDA graphs need CUDA devices, but --devices are CPU; leave --graphs out")
        self._check_nproc()
        if self.model is None:
            self.model, self.model_defaulted = DEFAULT_MODELS[self.device_type], True
        elif not isinstance(self.model, str) or not self.model:
            raise ConfigError(f"--model: expected a built-in name or 'pkg.module:factory', but got {self.model!r}")
        if self.out is not None:
            self.out = Path(self.out)
            check_out_dir(self.out)

    def _check_devices_exist(self) -> None:
        count = cuda_device_count()
        for d in self.devices:
            if d.type == "cuda" and (d.index or 0) >= count:
                fix = "list visible GPUs, e.g. cuda:0" if count else "use --devices cpu,cpu on a machine without one"
                raise ConfigError(f"--devices: {d} does not exist ({count} CUDA device(s) visible); {fix}")

    def _check_nproc(self) -> None:
        if self.nproc is None:
            return
        limit = process_limit()
        if self.nproc > limit and not self.allow_many_procs:
            raise ConfigError(f"--nproc {self.nproc}: this machine holds at most {limit} training processes "
                              f"({os.cpu_count()} cores, 4 per core, ~0.5 GiB each); lower --nproc, or pass "
                              f"--allow-many-procs if you know it holds more")
        if self.device_type == "cuda" and self.nproc > len(self.devices):
            raise ConfigError(f"--nproc {self.nproc}: every process needs a device, but --devices lists "
                              f"{len(self.devices)}; lower --nproc or list more devices")

    def _check_strategies(self) -> None:
        if isinstance(self.strategies, str):
            self.strategies = tuple(s.strip() for s in self.strategies.split(",") if s.strip())
        if not self.strategies or not all(isinstance(s, str) and s for s in self.strategies):
            raise ConfigError(f"--strategies: expected comma-separated strategy names, but got {self.strategies!r}")
        ordered = dict.fromkeys(("single", *self.strategies))  # single first, duplicates dropped
        self.strategies = tuple(ordered)

    def _check_counts(self) -> None:
        checks = (("--steps", self.steps, 1), ("--global-batch", self.global_batch, 1),
                  ("--warmup-steps", self.warmup_steps, 0))
        for flag, value, low in checks:
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ConfigError(f"{flag}: expected an integer >= {low}, but got {value!r}")
        if self.warmup_steps >= self.steps:
            raise ConfigError(f"--warmup-steps {self.warmup_steps} leaves no timed step of --steps {self.steps}; "
                             f"use fewer warmup steps or more steps")
        if self.nproc is not None and (isinstance(self.nproc, bool) or not isinstance(self.nproc, int)
                                       or self.nproc < 1):
            raise ConfigError(f"--nproc: expected an integer >= 1, but got {self.nproc!r}")
        if not self.lr > 0:
            raise ConfigError(f"--lr: expected > 0, but got {self.lr}")
        if not (self.bucket_cap_mb > 0 and self.first_bucket_mb > 0):
            raise ConfigError(f"bucket sizes must be > 0 MiB, but got bucket_cap_mb={self.bucket_cap_mb}, "
                             f"first_bucket_mb={self.first_bucket_mb}")

    @property
    def device_type(self) -> str:
        """"cuda" or "cpu"."""
        return self.devices[0].type

    def resolved_precision(self, autocast_capable: bool = True) -> str:
        """:data:`~gpucomm.train.defaults.BF16_AUTOCAST` or :data:`~gpucomm.train.defaults.FP32`: what the
        run actually uses (autocast only on CUDA, and only for a workload that can autocast)."""
        if self.precision == "fp32" or self.device_type != "cuda" or not autocast_capable:
            return FP32
        return RESOLVED_PRECISIONS["bf16"]
