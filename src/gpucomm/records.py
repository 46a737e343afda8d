"""Result records: one typed record per result row, written as JSON Lines, and the env block.

A result directory holds ``records.jsonl``.  Its first line is an :class:`EnvRecord` (versions,
devices, topology, NCCL settings, command line; collected by :func:`gpucomm.env.collect_env`); every later line is one result row
(:class:`BenchRecord`, :class:`TrainRecord`, :class:`AdviceRecord`, :class:`ScaleRecord`).  Each line carries ``"kind"`` and ``"schema_version"``.

Rows are appended, flushed and fsync'ed one at a time (:class:`RecordWriter`), so a run that is
interrupted — Ctrl-C, SIGTERM, a crash — keeps every row it finished.  A writer holds an exclusive
lock on its directory for its lifetime (a ``flock`` on the directory itself, so no lock file is left
behind), so two runs never interleave rows in one file.

Result directories have one name scheme, whichever command writes them (:func:`new_run_dir`):
``gpucomm-results/<command>-<UTC yyyymmdd-hhmmss>-<pid>/``, e.g. ``bench-20261203-141502-4711``.
Names sort by time within a command, say which command wrote them, and two runs started in the same
second differ by their process id.  ``--out DIR`` is that directory, unless DIR is a parent of result
directories (``gpucomm-results`` itself): then the run gets a new directory inside it (:func:`run_dir_for`).  Reports, plots and the
advisor read records through :func:`load` and nothing else; records are JSON, never pickle.

Units, fixed once: sizes in bytes; times in microseconds (``_us``) or milliseconds (``_ms``) as the
field name says; bandwidths in GB/s = 10^9 bytes/s per direction (nccl-tests' convention).
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import errno
import json
import os
import types
import typing
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

__all__ = [
    "RECORDS_FILE",
    "RESULTS_ROOT",
    "AdviceRecord",
    "ScaleRecord",
    "SCHEMA_VERSION",
    "BenchRecord",
    "DirectoryBusyError",
    "EnvRecord",
    "RecordError",
    "RecordWriter",
    "ResultSet",
    "TrainRecord",
    "holds_records",
    "load",
    "new_run_dir",
    "out_problem",
    "run_dir_for",
    "run_dir_name",
    "run_dirs_below",
    "parse_row",
    "validate_row",
]

SCHEMA_VERSION = 1
RECORDS_FILE = "records.jsonl"
RESULTS_ROOT = Path("gpucomm-results")
"""Where every command's results go by default (relative to the working directory; git-ignored)."""


class RecordError(ValueError):
    """A record line that is not valid JSON or does not match the schema."""


class DirectoryBusyError(RecordError):
    """Another run holds the results directory (its :class:`RecordWriter` lock)."""


@dataclass(kw_only=True, slots=True)
class EnvRecord:
    """Where and how a run happened: the first line of every records file."""

    kind: ClassVar[str] = "env"
    created: str
    """UTC time the run started, ISO 8601."""
    command: list[str]
    """The command line (``sys.argv``)."""
    versions: dict[str, Any]
    """gpucomm, torch, CUDA, NCCL, Python versions."""
    host: dict[str, Any]
    """Hostname, platform, CPU count."""
    devices: list[dict[str, Any]]
    """Visible CUDA devices (index, name, memory, capability); empty on a CPU-only machine."""
    device_type: str
    """"cuda" when the run used GPUs, "cpu" when the numbers are CPU numbers."""
    env_vars: dict[str, str]
    """NCCL_*, TORCH_NCCL_*, GLOO_*, CUDA_VISIBLE_DEVICES, … as they were in force."""
    topology: dict[str, Any] = field(default_factory=dict)
    """``gpucomm topo --json`` output (links, NUMA); empty when it could not be read."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Run parameters (sweep, iterations, …) chosen by the writer."""


@dataclass(kw_only=True, slots=True)
class BenchRecord:
    """One ``gpucomm bench`` row: one op, backend, size, dtype and placement."""

    kind: ClassVar[str] = "bench"
    op: str
    """Collective name (``gpucomm.collectives.CollectiveName``)."""
    backend: str
    """"torch.cuda.comm", "gpucomm.comm", "torch.distributed" or "gpucomm.dist"."""
    size: int
    """Bytes: the nccl-tests size column (the larger of one participant's send/receive buffers)."""
    count: int
    """Elements per participant, as nccl-tests counts them."""
    dtype: str
    """torch dtype name without the ``torch.`` prefix, e.g. "float32"."""
    n: int
    """Participants (devices or ranks)."""
    world_size: int
    """Processes (1 for one-process backends)."""
    placement: str
    """"out-of-place" or "in-place"."""
    device_type: str
    """"cuda" or "cpu"."""
    timing: str
    """How time was taken: "cuda-events", "cuda-graph" (always labelled) or "perf-counter"."""
    time_us_median: float
    """Median time of one op over the timed iterations, microseconds."""
    time_us_p99: float
    """99th-percentile time of one op, microseconds."""
    algbw_gbps: float
    """S / t (median time), GB/s."""
    busbw_gbps: float
    """algbw × busbw factor(n), GB/s."""
    wrong: int
    """Elements that differ from the independently computed expected result (nccl-tests #wrong); -1 = not checked."""
    iters: int
    """Timed iterations."""
    warmup: int
    """Untimed warmup iterations."""
    reduce_op: str | None = None
    """Reduction op for reducing collectives, else None."""
    root: int | None = None
    """Root participant for rooted collectives, else None."""
    baseline: str | None = None
    """The backend this row's ratio is relative to (torch.cuda.comm locally, torch.distributed across processes)."""
    speedup: float | None = None
    """Baseline median time / this row's median time (> 1 means faster than the baseline)."""
    devices: list[str] = field(default_factory=list)
    """Device of each participant held by the measuring process, e.g. ["cuda:0", "cuda:0"]."""
    note: str = ""
    """Anything a reader must know about this row (a path taken, an op not applicable)."""
    form: str = "plain"
    """How the backend was called: "plain" (the call a user writes), "prepared" (checked once by
    ``prepare``, rerun without checks) or "graph" (a prepared call replayed from a CUDA graph)."""


@dataclass(kw_only=True, slots=True)
class TrainRecord:
    """One ``gpucomm train`` result: one strategy on one model and device count."""

    kind: ClassVar[str] = "train"
    strategy: str
    """"single", "dp", "replicated", "ddp", … ."""
    model: str
    """Built-in model name or ``pkg.module:factory``."""
    n_devices: int
    """Devices the strategy trained on."""
    world_size: int
    """Processes (1 except for process-per-device strategies)."""
    device_type: str
    """"cuda" or "cpu"."""
    precision: str
    """"fp32" or "bf16-autocast"."""
    global_batch: int
    """Samples per optimizer step, summed over devices."""
    seq_len: int | None
    """Tokens per sample (None for non-sequence models)."""
    steps: int
    """Optimizer steps run, warmup included."""
    warmup_steps: int
    """Leading steps left out of the timing statistics."""
    status: str = "ok"
    """"ok", "not-applicable" (e.g. dp on CPU), "failed", or "interrupted" (Ctrl-C during the strategy: the
    row holds its finished steps, ``steps`` says how many; no final parameters, so no equality)."""
    params: int | None = None
    """Trainable parameter count."""
    samples_per_s: float | None = None
    """Median over timed steps of global_batch / step time."""
    tokens_per_s: float | None = None
    """samples_per_s × seq_len (None for non-sequence models)."""
    step_ms_median: float | None = None
    """Median step time, milliseconds."""
    step_ms_p90: float | None = None
    """90th-percentile step time, milliseconds."""
    step_ms: list[float] = field(default_factory=list)
    """Every step's time, milliseconds, warmup included."""
    comm_ms_median: float | None = None
    """Median per-step time spent in communication, where it can be isolated; else None."""
    peak_mem_bytes: list[int] = field(default_factory=list)
    """Peak allocated memory per device (CUDA only)."""
    scaling_efficiency: float | None = None
    """samples_per_s / (n_devices × single's samples_per_s); None without a single baseline."""
    losses: list[float] = field(default_factory=list)
    """Loss at every step."""
    equal_to_single: bool | None = None
    """Whether losses and final parameters matched ``single`` within ``tolerance``; None if not compared."""
    max_loss_rel_diff: float | None = None
    """Largest relative loss difference against single."""
    max_param_rel_diff: float | None = None
    """Largest relative parameter difference against single at the end."""
    tolerance: float | None = None
    """The relative tolerance the equality check used."""
    note: str = ""
    """Why a strategy is not applicable or failed, or anything else a reader must know."""
    devices: list[str] = field(default_factory=list)
    """Device of each participant, e.g. ["cuda:0", "cuda:0"] (a repeat means a shared GPU); one per DDP rank."""
    host_ms_median: float | None = None
    """Median over timed steps of the host time one process spends enqueuing a step (Python and kernel
    launches, waits excluded), milliseconds."""
    host_ms_per_device: float | None = None
    """``host_ms_median`` divided by the devices that one process drives: the host cost a strategy pays per
    device per step.  The advisor's calibration reads this instead of assuming a constant."""
    gpu_ms_median: float | None = None
    """Median over timed steps of the device time of one step on one device (CUDA events), milliseconds."""
    graphs: bool = False
    """True when each step replayed CUDA graphs (``--graphs``) instead of launching eagerly."""
    host_breakdown_ms: dict[str, float] = field(default_factory=dict)
    """Median host time per step of each phase a strategy reports (DataParallel: replicate, scatter,
    parallel_apply, gather, backward; replicated: launch per replica, all-reduce), milliseconds."""


@dataclass(kw_only=True, slots=True)
class AdviceRecord:
    """One ``gpucomm advise`` row: one layout's (or named strategy's) prediction for one hardware and workload.

    The planner's rows carry a ``layout`` (tp, pp, cp, dp, shard, mb, ac, vpp); the named strategies of the
    1-64 GPU comparison (dp, replicated, ddp, zero1-3, fsdp) carry the layout they amount to.  Memory is per
    GPU (the most loaded one: pipeline stage 0, or device 0 for DataParallel) and split into terms that add
    up to ``memory_per_gpu_bytes``.  Times are seconds per optimizer step.
    """

    kind: ClassVar[str] = "advice"
    strategy: str
    """A named strategy ("dp", "replicated", "ddp", "zero1", "zero2", "zero3", "fsdp") or, for planner rows,
    the layout in short form ("tp8 pp4 dp32 mb1 ac=full")."""
    hardware: str
    """Hardware profile name, e.g. "h200-nvswitch", or "calibrated:<file>"."""
    nodes: int
    """Machines."""
    gpus_per_node: int
    """GPUs per machine."""
    model: str
    """Preset name (``gpucomm.models``), "arch:L..-h..", ``pkg.module:factory``, or "<N> params"."""
    params: int
    """Parameter count Ψ."""
    global_batch: int
    """Samples (sequences) per optimizer step."""
    seq_len: int | None
    """Tokens per sample (None for non-sequence models)."""
    step_time_s: float
    """Predicted seconds per optimizer step."""
    samples_per_s: float
    """Predicted throughput, samples per second (all GPUs)."""
    scaling_efficiency: float | None
    """Predicted throughput / (GPUs × one GPU's predicted throughput at the same per-GPU batch); None when
    one GPU cannot hold the model (planner rows)."""
    memory_per_gpu_bytes: int
    """Predicted peak memory of the most loaded GPU that must fit: reserved (allocated + the caching allocator's
    margin) plus the memory outside PyTorch's allocator (CUDA context, NCCL) — every ``memory_*_bytes`` term
    below except ``allocated`` and ``reserved`` summed."""
    memory_capacity_bytes: int
    """Usable bytes of one GPU as the driver reports them (the profile's capacity and its source); 0 when the
    profile has none (a CPU), and then ``fits`` is True."""
    fits: bool
    """memory_per_gpu_bytes <= memory_capacity_bytes (always True without a capacity); a row that does not fit
    is flagged, never ranked."""
    comm_share: float
    """Exposed communication time (not hidden behind compute; pipeline bubble excluded) / step time, 0..1."""
    rank: int | None
    """1 = recommended; None when it does not fit or does not apply."""
    reason: str
    """Plain-language reason for the rank (why chosen, or why it lost / cannot run)."""
    calibrated: bool = False
    """True when measured (bench/train) values replaced datasheet ones."""
    tokens_per_s: float | None = None
    """samples_per_s × seq_len, all GPUs, for sequence models."""
    compute_s: float | None = None
    """Predicted compute per step on one GPU (forward + backward + recomputation + optimizer)."""
    comm_s: float | None = None
    """Predicted communication per step, exposed or not."""
    layout: dict[str, Any] = field(default_factory=dict)
    """The parallel layout: ``tp``, ``pp``, ``cp``, ``dp`` (ints; tp×pp×cp×dp = GPUs), ``shard`` ("none",
    "zero1", "zero2", "zero3", "fsdp", "hsdp"), ``mb`` (micro-batch, sequences per model replica), ``ac``
    (activation checkpointing: "none", "selective" = Megatron's, the attention core recomputed, "op" =
    torchtitan's per-op policy, every second matmul recomputed, "full"), ``vpp`` (virtual stages per pipeline
    rank, 1 = plain 1F1B); gradient accumulation is ``global_batch / (dp × mb)``."""
    tokens_per_s_per_gpu: float | None = None
    """tokens_per_s / GPUs: the figure published training runs report (torchtitan's "wps", LLM Foundry's
    "tok/s/GPU")."""
    mfu: float | None = None
    """Model FLOPs utilisation, 0..1: model FLOPs per token (``gpucomm.models``: 6 N_mm + 12 L h s, no
    recomputation) × tokens_per_s_per_gpu / the GPU's dense peak for the compute dtype."""
    exposed_comm_s: float | None = None
    """Communication not hidden behind compute, per step."""
    bubble_s: float | None = None
    """Pipeline bubble per step: (pp − 1) / (micro-batches × vpp) of the pipelined compute."""
    memory_params_bytes: int | None = None
    """Weights this GPU holds between steps (after TP/PP split and sharding)."""
    memory_grads_bytes: int | None = None
    """Gradients this GPU holds (sharded by zero2/zero3/fsdp/hsdp)."""
    memory_optimizer_bytes: int | None = None
    """Optimizer state (fp32 master weights + Adam moments in mixed precision), sharded by zero1 and up."""
    memory_activations_bytes: int | None = None
    """Stored activations: per micro-batch (Korthikanti et al. 2022, by ``ac``) × micro-batches in flight."""
    memory_logits_bytes: int | None = None
    """The logits and the loss's tensors at the start of backward (fp32 log-softmax and gradients when the loss
    upcasts; 16-bit logits and gradient when it is fused), on the last pipeline stage."""
    memory_autocast_bytes: int | None = None
    """16-bit copies of fp32 weights that autocast saves for backward."""
    memory_buffers_bytes: int | None = None
    """Communication buffers and unsharded units (DDP buckets, FSDP's gathered layers)."""
    memory_margin_bytes: int | None = None
    """The caching allocator's reserved-beyond-allocated margin."""
    memory_reserve_bytes: int | None = None
    """Memory outside PyTorch's allocator (CUDA context, cuBLAS workspaces, NCCL buffers)."""
    memory_allocated_bytes: int | None = None
    """Predicted peak allocated (``torch.cuda.max_memory_allocated``): the terms from params to buffers."""
    memory_reserved_bytes: int | None = None
    """Predicted peak reserved (``torch.cuda.max_memory_reserved``): allocated + margin."""


@dataclass(kw_only=True, slots=True)
class ScaleRecord:
    """One point of ``gpucomm advise --scale``: a strategy's predicted throughput at a GPU count."""

    kind: ClassVar[str] = "scale"
    strategy: str
    """Strategy name, as in AdviceRecord."""
    hardware: str
    """Hardware profile name."""
    gpus: int
    """Total GPUs (nodes × gpus_per_node)."""
    nodes: int
    """Machines."""
    samples_per_s: float
    """Predicted throughput."""
    scaling_efficiency: float
    """Predicted throughput / (gpus × one GPU's)."""
    step_time_s: float
    """Predicted seconds per step."""
    fits: bool
    """Whether the strategy fits in memory at this scale."""


RECORD_TYPES: dict[str, type] = {t.kind: t for t in (EnvRecord, BenchRecord, TrainRecord, AdviceRecord,
                                                     ScaleRecord)}
Record = EnvRecord | BenchRecord | TrainRecord | AdviceRecord | ScaleRecord


def to_row(record: Record) -> dict[str, Any]:
    """A record as a JSON-ready dict with ``kind`` and ``schema_version`` first."""
    return {"kind": record.kind, "schema_version": SCHEMA_VERSION, **dataclasses.asdict(record)}


def validate_row(row: dict[str, Any]) -> None:
    """Raise :class:`RecordError` unless ``row`` matches its kind's schema (fields and JSON types)."""
    if not isinstance(row, dict):
        raise RecordError(f"a record must be a JSON object, but got {type(row).__name__}")
    kind = row.get("kind")
    if kind not in RECORD_TYPES:
        raise RecordError(f"unknown record kind {kind!r}; expected one of {sorted(RECORD_TYPES)}")
    if row.get("schema_version") != SCHEMA_VERSION:
        raise RecordError(f"{kind} record has schema_version {row.get('schema_version')!r}; "
                          f"this gpucomm reads version {SCHEMA_VERSION}")
    cls = RECORD_TYPES[kind]
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = set(row) - names - {"kind", "schema_version"}
    if unknown:
        raise RecordError(f"{kind} record has unknown fields {sorted(unknown)}")
    for f in dataclasses.fields(cls):
        if f.name not in row:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise RecordError(f"{kind} record lacks the required field {f.name!r}")
            continue
        if not _json_matches(row[f.name], hints[f.name]):
            raise RecordError(f"{kind} record field {f.name!r}: expected {hints[f.name]}, "
                              f"but got {type(row[f.name]).__name__} {row[f.name]!r}")


def _json_matches(value: Any, hint: Any) -> bool:
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return any(_json_matches(value, h) for h in typing.get_args(hint))
    if hint is type(None):
        return value is None
    if hint is Any:
        return True
    if hint is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if origin is list:
        (item,) = typing.get_args(hint) or (Any,)
        return isinstance(value, list) and all(_json_matches(v, item) for v in value)
    if origin is dict:
        return isinstance(value, dict)
    return isinstance(value, hint)


def parse_row(row: dict[str, Any]) -> Record:
    """Validate a row and build its record object."""
    validate_row(row)
    cls = RECORD_TYPES[row["kind"]]
    return cls(**{k: v for k, v in row.items() if k not in ("kind", "schema_version")})


def run_dir_name(command: str, *, when: _dt.datetime | None = None, pid: int | None = None) -> str:
    """``<command>-<UTC yyyymmdd-hhmmss>-<pid>``: the name of a run's default result directory."""
    if not command or not command.replace("-", "").isalnum():
        raise ValueError(f"command: expected a command name such as 'bench', but got {command!r}")
    when = when or _dt.datetime.now(_dt.timezone.utc)
    return f"{command}-{when.astimezone(_dt.timezone.utc):%Y%m%d-%H%M%S}-{os.getpid() if pid is None else pid}"


def new_run_dir(command: str, parent: str | os.PathLike[str] = RESULTS_ROOT, *, create: bool = True) -> Path:
    """A new result directory ``<parent>/<command>-<UTC yyyymmdd-hhmmss>-<pid>`` that no run uses.

    ``create=True`` makes it now, exclusively (``-2``, ``-3``… when the name is taken: even a reused
    pid in the same second cannot share a directory).  ``create=False`` only picks a name that does
    not exist yet, for a command that makes its directory when its first row is written (so a run that
    fails before then leaves nothing behind).
    """
    parent = Path(parent)
    base = run_dir_name(command)
    if create:
        parent.mkdir(parents=True, exist_ok=True)
    for k in range(1, 1000):
        path = parent / (base if k == 1 else f"{base}-{k}")
        if not create:
            if not path.exists():
                return path
            continue
        try:
            path.mkdir()
        except FileExistsError:
            continue
        return path
    raise FileExistsError(f"{parent / base}-*: every name is taken")


def holds_records(directory: str | os.PathLike[str]) -> bool:
    """Whether ``directory`` itself holds a records file: it is a run's result directory (hidden files are a
    run's private scratch, never results)."""
    directory = Path(directory)
    return directory.is_dir() and any(not f.name.startswith(".") for f in directory.glob("*.jsonl") if f.is_file())


def run_dirs_below(directory: str | os.PathLike[str]) -> list[Path]:
    """The result directories below ``directory`` (not descending into a run), in path order."""
    found: list[Path] = []
    for child in sorted(p for p in Path(directory).iterdir() if p.is_dir() and not p.name.startswith(".")):
        found += [child] if holds_records(child) else run_dirs_below(child)
    return found


def run_dir_for(command: str, out: str | os.PathLike[str] | None, *, create: bool = True) -> Path:
    """Where a command's ``--out`` puts its results, the same for bench, train and advise.

    * no ``out`` (None or ""): a new :func:`new_run_dir` under :data:`RESULTS_ROOT`;
    * an ``out`` that holds result directories but no records itself — a parent of runs, such as
      ``gpucomm-results`` — : a new :func:`new_run_dir` inside it (writing into the parent itself would make
      every run below it one run, to ``gpucomm report``);
    * any other ``out``: that directory (made when the first record is written, by :class:`RecordWriter`).

    ``create`` as for :func:`new_run_dir` (it applies to the first two cases only).
    """
    if out is None or str(out) == "":
        return new_run_dir(command, create=create)
    path = Path(out)
    if path.is_dir() and not holds_records(path) and run_dirs_below(path):
        return new_run_dir(command, path, create=create)
    return path


def out_problem(directory: str | os.PathLike[str]) -> str:
    """Why ``directory`` cannot become a result directory, in words for a one-line ``--out`` error; "" if it can.

    Checked by doing it — the directory (and its missing parents) made, a file written and removed — and then
    undone, so the check leaves nothing behind (a run that fails later has written nothing) and catches what
    permission bits do not say (a read-only or virtual file system, a user for whom every directory is
    writable).
    """
    path = Path(directory)
    for part in (path, *path.parents):
        if part.exists() and not part.is_dir():
            return f"{str(part)!r} is a file, not a directory; give a new or existing directory"
    missing = [part for part in (path, *path.parents) if not part.exists()]  # deepest first
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / f".gpucomm-write-test-{os.getpid()}"
        probe.write_text("")
        probe.unlink()
    except OSError as exc:
        return f"cannot write results there ({exc.strerror or exc}); give a writable directory"
    finally:
        for part in missing:
            try:
                part.rmdir()
            except OSError:
                pass
    return ""


def _lock(directory: Path) -> int:
    """Take the exclusive lock on ``directory`` (a ``flock`` on the directory itself); return its fd.

    ``flock`` locks die with their process, so a crashed run never leaves the directory locked, and
    locking the directory rather than a file in it leaves nothing behind.  Where ``fcntl`` does not
    exist (Windows) no lock is taken.
    """
    try:
        import fcntl
    except ImportError:
        return os.open(os.devnull, os.O_RDONLY)
    fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        os.close(fd)
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            raise DirectoryBusyError(
                f"--out {str(directory)!r}: another gpucomm run is writing results there; wait for it to "
                f"finish or choose another directory") from None
        raise
    return fd


class RecordWriter:
    """Append records to ``<directory>/records.jsonl``, one flushed and fsync'ed line per record.

    The env record is written first, on construction.  Use as a context manager or call
    :meth:`close`; a row that was written before an interruption is on disk whatever happens next.

    Raises:
        DirectoryBusyError: another writer (in this or another process) holds ``directory``.
        OSError: ``directory`` cannot be created or written (the message names ``--out``).
    """

    def __init__(self, directory: str | os.PathLike[str], env: EnvRecord) -> None:
        self.directory = Path(directory)
        self._lock = None
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            self._lock = _lock(self.directory)
            self._file = open(self.directory / RECORDS_FILE, "a", encoding="utf-8")
        except OSError as exc:
            self._unlock()
            raise OSError(f"--out {str(self.directory)!r}: cannot write results there ({exc.strerror}); "
                          f"choose a writable directory") from exc
        except DirectoryBusyError:
            raise
        self.path = self.directory / RECORDS_FILE
        self.write(env)

    def write(self, record: Record) -> None:
        """Append one record and make it durable before returning."""
        self._file.write(json.dumps(to_row(record), allow_nan=False) + "\n")
        self._file.flush()
        os.fsync(self._file.fileno())

    def close(self) -> None:
        """Close the file and release the directory."""
        if not self._file.closed:
            self._file.close()
        self._unlock()

    def _unlock(self) -> None:
        if self._lock is not None:
            os.close(self._lock)  # closing the descriptor releases the flock
            self._lock = None

    def __enter__(self) -> RecordWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass(slots=True)
class ResultSet:
    """Everything read from one or more result directories, in file order."""

    env: list[EnvRecord] = field(default_factory=list)
    bench: list[BenchRecord] = field(default_factory=list)
    train: list[TrainRecord] = field(default_factory=list)
    advice: list[AdviceRecord] = field(default_factory=list)
    scale: list[ScaleRecord] = field(default_factory=list)
    sources: list[Path] = field(default_factory=list)

    def add(self, record: Record) -> None:
        getattr(self, record.kind).append(record)


def _record_files(paths: Iterable[str | os.PathLike[str]]) -> Iterator[Path]:
    for p in map(Path, paths):
        if p.is_dir():
            # hidden files are a run's private scratch (bench's process-group stream), never results
            files = sorted(f for f in p.rglob("*.jsonl") if not f.name.startswith("."))
            if not files:
                raise RecordError(f"{str(p)!r} holds no *.jsonl records; pass a gpucomm result directory")
            yield from files
        elif p.is_file():
            yield p
        else:
            raise RecordError(f"{str(p)!r} does not exist; pass a result directory or a records.jsonl file")


def load(*paths: str | os.PathLike[str]) -> ResultSet:
    """Read and validate every record under the given directories or files.

    A truncated last line (a run killed mid-write) is skipped; any other bad line raises
    :class:`RecordError` naming the file and line.
    """
    result = ResultSet()
    for path in _record_files(paths):
        result.sources.append(path)
        try:
            lines = path.read_bytes().splitlines()
        except OSError as exc:
            raise RecordError(f"{path}: cannot read it ({exc.strerror or exc})") from None
        for lineno, raw in enumerate(lines, 1):
            if not raw.strip():
                continue
            try:
                row = _decode(raw)
            except RecordError as exc:
                if lineno == len(lines) and exc.args[0].startswith("not JSON"):
                    continue  # the run was killed while writing its last line
                raise RecordError(f"{path}:{lineno}: {exc}") from None
            try:
                result.add(parse_row(row))
            except (RecordError, TypeError) as exc:
                raise RecordError(f"{path}:{lineno}: {exc}") from None
    return result


_MAX_DEPTH = 32
"""No record nests deeper than a few levels; deeper input is refused before it can exhaust the stack."""


def _decode(raw: bytes) -> Any:
    """One line's JSON value, or :class:`RecordError` saying in one line what is wrong with it."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RecordError(f"not UTF-8 text (byte {exc.start}); this is not a gpucomm records line") from None
    if _depth(text) > _MAX_DEPTH:
        raise RecordError(f"JSON nested more than {_MAX_DEPTH} levels deep; this is not a gpucomm records line")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise RecordError(f"not JSON ({exc.msg})") from None
    except (ValueError, RecursionError) as exc:  # e.g. an integer longer than Python converts
        raise RecordError(f"JSON that cannot be read ({str(exc).split(';')[0][:120]})") from None


def _depth(text: str) -> int:
    """The deepest bracket nesting in ``text``, brackets inside strings ignored (a cheap upper bound)."""
    depth = deepest = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
    return deepest
