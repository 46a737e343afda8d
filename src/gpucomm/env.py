"""The env block: where and how a run happened — versions, devices, topology, settings, command line.

Every results file starts with one :class:`~gpucomm.records.EnvRecord`, built here by
:func:`collect_env`: gpucomm, torch, CUDA, NCCL and Python versions; the visible CUDA devices; the
``gpucomm topo`` topology; every environment variable that changes what a collective does
(``NCCL_*``, ``GLOO_*``, ``CUDA_VISIBLE_DEVICES``, …); host name, platform and CPU count; the command
line.  A reader of a results file years later can tell what was measured, on what, and with which
settings.  torch is imported when an env block is collected, never at import time.
"""

from __future__ import annotations

import datetime as _dt
import os
import platform
import socket
import sys
from typing import Any

from gpucomm.records import EnvRecord

__all__ = ["ENV_NAMES", "ENV_PREFIXES", "collect_env"]

ENV_PREFIXES = ("NCCL_", "TORCH_NCCL_", "TORCH_SYMM_MEM_", "NVSHMEM_", "GLOO_", "TORCH_DISTRIBUTED_")
"""Environment variables with these prefixes change what a collective does; recorded in every env block."""
ENV_NAMES = ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_MAX_CONNECTIONS", "OMP_NUM_THREADS", "MASTER_ADDR",
             "MASTER_PORT", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "SLURM_JOB_ID")
"""Single environment variables recorded for the same reason."""


def _versions() -> dict[str, Any]:
    import torch

    from gpucomm import __version__

    nccl = None
    if torch.cuda.is_available() and hasattr(torch.cuda, "nccl"):
        try:
            v = torch.cuda.nccl.version()
            nccl = ".".join(map(str, v)) if isinstance(v, tuple) else str(v)
        except Exception:
            nccl = None
    return {"gpucomm": __version__, "torch": torch.__version__, "cuda": torch.version.cuda, "nccl": nccl,
            "python": platform.python_version()}


def _cuda_devices() -> list[dict[str, Any]]:
    import torch

    from gpucomm.devices import cuda_device_count

    out = []
    for i in range(cuda_device_count()):
        p = torch.cuda.get_device_properties(i)
        out.append({"index": i, "name": p.name, "total_memory_bytes": int(p.total_memory),
                    "capability": f"{p.major}.{p.minor}", "multiprocessors": p.multi_processor_count})
    return out


def _env_vars() -> dict[str, str]:
    return {k: v for k, v in sorted(os.environ.items()) if k.startswith(ENV_PREFIXES) or k in ENV_NAMES}


def _topology() -> dict[str, Any]:
    try:
        from gpucomm import topology
    except ImportError:
        return {}
    try:
        return topology.collect().to_dict()
    except Exception as exc:  # topology is informative; its failure must not lose a run
        return {"error": f"{type(exc).__name__}: {exc}"}


def _cpu_model() -> str:
    """The host CPU's model name (Linux: ``/proc/cpuinfo``; else what :func:`platform.processor` says): an eager
    loop's host time, and so a host-paced step, depends on it (two lent H200 machines of the same day ran one
    host-paced step in 102 and 159 ms, advisor-single-gpu-r3/-r4_h200x1_2026-12-04)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def collect_env(device_type: str, extra: dict[str, Any] | None = None,
                command: list[str] | None = None) -> EnvRecord:
    """The env block for a run on ``device_type`` ("cuda" or "cpu")."""
    return EnvRecord(
        created=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        command=list(sys.argv if command is None else command),
        versions=_versions(),
        host={"hostname": socket.gethostname(), "platform": platform.platform(), "cpu_count": os.cpu_count(),
              "cpu_model": _cpu_model()},
        devices=_cuda_devices(),
        device_type=device_type,
        env_vars=_env_vars(),
        topology=_topology(),
        extra=dict(extra or {}),
    )
