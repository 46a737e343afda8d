"""Process-group setup and teardown: backend choice, launcher environments, timeouts, loopback defaults.

:func:`init` starts the default process group from whatever started this process:

* **torchrun** (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR``, ``MASTER_PORT``): ``env://``
  rendezvous, exactly as torch does it;
* **SLURM** (``SLURM_PROCID``, ``SLURM_NTASKS``, ``SLURM_LOCALID``; ``MASTER_ADDR`` must be exported,
  ``MASTER_PORT`` defaults to 29500): ``tcp://MASTER_ADDR:MASTER_PORT``;
* **nothing** (a plain ``python script.py``): a world of one, rendezvous through a ``FileStore`` in a
  private temporary directory, so nothing listens on any socket;
* an explicit ``store``, ``rank`` and ``world_size`` (what :func:`gpucomm.dist.launch` passes).

The backend is ``nccl`` when CUDA is available and ``gloo`` otherwise (:func:`backend_for`).  Under NCCL the current CUDA
device is set to ``cuda:LOCAL_RANK`` before the group is created (one GPU per process), which is the
device :func:`device` reports and :class:`gpucomm.ProcessGroupCommunicator` holds.

:func:`shutdown` destroys the group and removes the private store directory; the object :func:`init`
returns is a context manager that calls it, also when the body raises::

    with gpucomm.dist.init() as pg:
        print(pg.rank, pg.world_size, pg.device)
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import inspect
import os
import shutil
import tempfile
import warnings
from collections.abc import Mapping
from dataclasses import dataclass

import torch
import torch.distributed as td

from gpucomm.devices import cuda_device_count

__all__ = [
    "DEFAULT_TIMEOUT",
    "DistEnv",
    "ProcessGroup",
    "backend_for",
    "current",
    "default_backend",
    "device",
    "init",
    "is_initialized",
    "known_backends",
    "read_env",
    "shutdown",
    "to_timedelta",
]

DEFAULT_TIMEOUT = 600.0
"""Seconds a collective may block before it fails (torch's NCCL default; gloo's is 30 minutes)."""

_SLURM_DEFAULT_PORT = 29500  # torchrun's default MASTER_PORT


@dataclass(frozen=True, slots=True, kw_only=True)
class DistEnv:
    """Who this process is, as its launcher described it in the environment."""

    source: str
    """"torchrun" (RANK/WORLD_SIZE set), "slurm" (SLURM_PROCID/SLURM_NTASKS set) or "none"."""
    rank: int
    """Global rank, 0 .. world_size-1."""
    world_size: int
    """Number of processes in the job."""
    local_rank: int
    """Rank on this machine; selects the CUDA device under NCCL."""
    local_world_size: int
    """Processes on this machine."""
    master_addr: str | None = None
    """Rendezvous host (MASTER_ADDR), when the launcher gave one."""
    master_port: int | None = None
    """Rendezvous port (MASTER_PORT), when the launcher gave one."""


def _int_env(environ: Mapping[str, str], name: str, default: int | None = None) -> int:
    text = environ.get(name)
    if text is None:
        if default is None:
            raise ValueError(f"{name}: expected an integer environment variable, but it is not set; "
                             f"export it or start the job with torchrun")
        return default
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"{name}: expected an integer, but got {text!r}; fix the launcher's environment") from None


def read_env(environ: Mapping[str, str] | None = None) -> DistEnv:
    """Read torchrun's or SLURM's variables (torchrun's win when both are present).

    Raises:
        ValueError: a variable is not an integer, or RANK is not in ``[0, WORLD_SIZE)``.
    """
    env = os.environ if environ is None else environ
    if "RANK" in env and "WORLD_SIZE" in env:
        found = _torchrun_env(env)
    elif "SLURM_PROCID" in env and "SLURM_NTASKS" in env:
        found = _slurm_env(env)
    else:
        return DistEnv(source="none", rank=0, world_size=1, local_rank=0, local_world_size=1)
    if not 0 <= found.rank < found.world_size:
        raise ValueError(f"{found.source} environment: RANK must be in [0, {found.world_size}), "
                         f"but got {found.rank}; check the launcher's RANK/WORLD_SIZE")
    return found


def _torchrun_env(env: Mapping[str, str]) -> DistEnv:
    port = env.get("MASTER_PORT")
    return DistEnv(source="torchrun", rank=_int_env(env, "RANK"), world_size=_int_env(env, "WORLD_SIZE"),
                   local_rank=_int_env(env, "LOCAL_RANK", 0),
                   local_world_size=_int_env(env, "LOCAL_WORLD_SIZE", 1),
                   master_addr=env.get("MASTER_ADDR"), master_port=int(port) if port else None)


def _slurm_env(env: Mapping[str, str]) -> DistEnv:
    ntasks = _int_env(env, "SLURM_NTASKS")
    per_node = env.get("SLURM_NTASKS_PER_NODE", "")  # may read "2(x3)"; then derive it from the node count
    local_world = int(per_node) if per_node.isdigit() else max(1, ntasks // _int_env(env, "SLURM_NNODES", 1))
    return DistEnv(source="slurm", rank=_int_env(env, "SLURM_PROCID"), world_size=ntasks,
                   local_rank=_int_env(env, "SLURM_LOCALID", 0), local_world_size=local_world,
                   master_addr=env.get("MASTER_ADDR"),
                   master_port=_int_env(env, "MASTER_PORT", _SLURM_DEFAULT_PORT))


def backend_for(device_type: str) -> str:
    """The backend for participants on ``device_type``: NCCL on CUDA, gloo on everything else.

    The one place that choice is made: :func:`init`, :func:`gpucomm.dist.launch`, ``gpucomm bench``
    and ``gpucomm train`` all ask here.
    """
    return "nccl" if device_type == "cuda" else "gloo"


def default_backend() -> str:
    """:func:`backend_for` this machine: ``"nccl"`` when a CUDA device is visible, ``"gloo"`` otherwise."""
    return backend_for("cuda" if cuda_device_count() > 0 else "cpu")


def to_timedelta(timeout: float | int | _dt.timedelta, arg: str = "timeout") -> _dt.timedelta:
    """Accept seconds or a ``timedelta``; reject non-positive values."""
    if isinstance(timeout, _dt.timedelta):
        seconds = timeout.total_seconds()
    elif isinstance(timeout, int | float) and not isinstance(timeout, bool):
        seconds = float(timeout)
    else:
        raise TypeError(f"{arg}: expected seconds (a number) or a datetime.timedelta, "
                        f"but got {type(timeout).__name__} {timeout!r}")
    if not seconds > 0:
        raise ValueError(f"{arg}: expected a positive number of seconds, but got {seconds!r}")
    return _dt.timedelta(seconds=seconds)


@dataclass(frozen=True, slots=True, kw_only=True)
class ProcessGroup:
    """The default process group :func:`init` started; a context manager that calls :func:`shutdown`."""

    backend: str
    """"nccl" or "gloo" (or whatever backend was asked for)."""
    rank: int
    """This process's global rank."""
    world_size: int
    """Processes in the group."""
    local_rank: int
    """Rank on this machine."""
    device: torch.device
    """This process's device: ``cuda:LOCAL_RANK`` under NCCL, ``cpu`` otherwise."""
    source: str
    """Where rank and world size came from: "torchrun", "slurm", "none" or "explicit"."""

    def __enter__(self) -> ProcessGroup:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        shutdown(abort=exc is not None)


_state: dict[str, object] = {}  # the running group's ProcessGroup and private store directory
_GROUP_INFO: dict[object, tuple[str, int, int]] = {}  # gpucomm.dist's cache: group -> (backend, size, rank)


def known_backends() -> list[str]:
    """The backends this torch build has ("gloo", "nccl", "mpi", "ucc", ... and registered ones).

    torch's tracing-only ``"fake"`` backend is left out: it moves no data.
    """
    names = [b for b in getattr(td.Backend, "backend_list", ["gloo", "nccl", "mpi"]) if b not in ("undefined", "fake")]
    return [b for b in names if getattr(td, f"is_{b}_available", lambda: True)()]


def _check_backend(backend: str | None) -> str:
    if backend is None:
        return default_backend()
    if not isinstance(backend, str):
        raise TypeError(f"backend: expected a str such as 'nccl' or 'gloo', but got "
                        f"{type(backend).__name__} {backend!r}")
    name = backend.lower()
    if name == "nccl" and cuda_device_count() == 0:
        raise ValueError("backend: 'nccl' needs CUDA devices, but none is visible; "
                         "use backend='gloo' (or leave backend=None) on a CPU-only machine")
    valid = known_backends()
    if name not in valid and ":" not in name:  # "cpu:gloo,cuda:nccl" is torch's to check
        raise ValueError(f"backend: expected one of {', '.join(map(repr, valid))}, but got {backend!r}; "
                         f"use 'gloo' on CPU or 'nccl' on NVIDIA GPUs (or None to choose)")
    return name


def _pick_device(backend: str, local_rank: int) -> torch.device:
    if backend != "nccl":
        return torch.device("cpu")
    count = cuda_device_count()
    if not 0 <= local_rank < count:
        raise ValueError(f"LOCAL_RANK: NCCL needs one GPU per process, but local rank {local_rank} has no "
                         f"device ({count} CUDA device(s) visible); start at most {count} process(es) per "
                         f"machine, or use backend='gloo'")
    torch.cuda.set_device(local_rank)
    return torch.device("cuda", local_rank)


def _init_kwargs(device_: torch.device) -> dict:
    # device_id binds the NCCL communicator to this process's GPU (torch >= 2.3); older torch lacks it.
    if device_.type == "cuda" and "device_id" in inspect.signature(td.init_process_group).parameters:
        return {"device_id": device_}
    return {}


def init(backend: str | None = None, timeout: float | _dt.timedelta = DEFAULT_TIMEOUT, *,
         store: td.Store | None = None, rank: int | None = None,
         world_size: int | None = None) -> ProcessGroup:
    """Start the default process group from the environment (or from ``store``/``rank``/``world_size``).

    Args:
        backend: ``"nccl"``, ``"gloo"``, or ``None`` for nccl when CUDA is available, else gloo.
        timeout: seconds (or a timedelta) a collective may block before it fails.
        store: a ``torch.distributed.Store`` to rendezvous through; needs ``rank`` and ``world_size``.
        rank: this process's rank when ``store`` is given.
        world_size: the number of processes when ``store`` is given.

    Returns:
        a :class:`ProcessGroup` describing the group; use it as a context manager to shut down.

    Raises:
        RuntimeError: a default process group is already initialised.
        ValueError: bad environment values, NCCL without GPUs, or more local ranks than GPUs.
    """
    if td.is_initialized():
        raise RuntimeError("gpucomm.dist.init: a default process group is already initialised in this "
                           "process; call gpucomm.dist.shutdown() first")
    name = _check_backend(backend)
    delta = to_timedelta(timeout)
    if store is not None:
        return _init_explicit(name, delta, store, rank, world_size)
    env = read_env()
    if env.source == "none":
        return _init_single(name, delta)
    return _init_from_env(name, delta, env)


def _init_explicit(backend: str, timeout: _dt.timedelta, store: td.Store, rank: int | None,
                   world_size: int | None) -> ProcessGroup:
    if not isinstance(world_size, int) or world_size < 1:
        raise ValueError(f"world_size: expected an int >= 1 with store=, but got {world_size!r}")
    if not isinstance(rank, int) or not 0 <= rank < world_size:
        raise ValueError(f"rank: expected an int in [0, {world_size}) with store=, but got {rank!r}")
    local_rank = int(os.environ.get("LOCAL_RANK", rank))
    dev = _pick_device(backend, local_rank)
    td.init_process_group(backend, store=store, rank=rank, world_size=world_size, timeout=timeout,
                            **_init_kwargs(dev))
    return _remember(ProcessGroup(backend=backend, rank=rank, world_size=world_size, local_rank=local_rank,
                                  device=dev, source="explicit"), None)


@contextlib.contextmanager
def _loopback_sockets():
    """Pin gloo's and NCCL's sockets to ``lo`` while the group is created (unless the user chose)."""
    names = [n for n in ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME") if n not in os.environ]
    os.environ.update(dict.fromkeys(names, "lo"))
    try:
        yield
    finally:
        for n in names:
            os.environ.pop(n, None)


def _init_single(backend: str, timeout: _dt.timedelta) -> ProcessGroup:
    # A world of one through a FileStore in a 0700 directory, its sockets on loopback: nothing
    # listens beyond this machine.
    tmp = tempfile.mkdtemp(prefix="gpucomm-pg-")
    try:
        dev = _pick_device(backend, 0)
        store = td.FileStore(os.path.join(tmp, "store"), 1)
        with _loopback_sockets():
            td.init_process_group(backend, store=store, rank=0, world_size=1, timeout=timeout,
                                    **_init_kwargs(dev))
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return _remember(ProcessGroup(backend=backend, rank=0, world_size=1, local_rank=0, device=dev,
                                  source="none"), tmp)


def _init_from_env(backend: str, timeout: _dt.timedelta, env: DistEnv) -> ProcessGroup:
    dev = _pick_device(backend, env.local_rank)
    if env.source == "torchrun":
        method = "env://"
    elif env.master_addr:
        method = f"tcp://{env.master_addr}:{env.master_port}"
    else:
        raise ValueError("MASTER_ADDR: SLURM does not set it; export it in the job script, e.g. "
                         "export MASTER_ADDR=$(scontrol show hostnames $SLURM_JOB_NODELIST | head -n1)")
    td.init_process_group(backend, init_method=method, rank=env.rank, world_size=env.world_size,
                            timeout=timeout, **_init_kwargs(dev))
    return _remember(ProcessGroup(backend=backend, rank=env.rank, world_size=env.world_size,
                                  local_rank=env.local_rank, device=dev, source=env.source), None)


def _remember(pg: ProcessGroup, tmpdir: str | None) -> ProcessGroup:
    _state.clear()
    _state.update(group=pg, tmpdir=tmpdir)
    return pg


def current() -> ProcessGroup | None:
    """The :class:`ProcessGroup` that :func:`init` started, or None (also when torch's was started directly)."""
    return _state.get("group") if td.is_initialized() else None  # type: ignore[return-value]


def is_initialized() -> bool:
    """True when a default process group exists (started by :func:`init` or by torch directly)."""
    return td.is_available() and td.is_initialized()


def device() -> torch.device:
    """This process's device: ``cuda:<current>`` under NCCL, ``cpu`` for every other backend."""
    pg = current()
    if pg is not None:
        return pg.device
    if is_initialized() and td.get_backend() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def shutdown(*, abort: bool = False) -> None:
    """Destroy the default process group (if any) and remove the private store directory.

    Safe to call twice and when no group exists.  With ``abort=True`` (the context manager passes it
    when its body raised) an NCCL group is aborted rather than destroyed, so that a peer that is gone
    cannot make teardown hang.
    """
    tmpdir = _state.get("tmpdir")
    _state.clear()
    _GROUP_INFO.clear()  # drop the references to the groups about to be destroyed
    try:
        if is_initialized():
            _teardown(abort)
    finally:
        if tmpdir:
            shutil.rmtree(str(tmpdir), ignore_errors=True)


def _teardown(abort: bool) -> None:
    abort_fn = getattr(td.distributed_c10d, "_abort_process_group", None)
    if abort and abort_fn is not None and td.get_backend() == "nccl":
        try:
            abort_fn()
            return
        except Exception as exc:  # fall back to a plain destroy
            warnings.warn(f"gpucomm.dist.shutdown: aborting the NCCL group failed ({exc}); destroying it",
                          RuntimeWarning, stacklevel=3)
    td.destroy_process_group()
