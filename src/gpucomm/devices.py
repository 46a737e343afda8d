"""Device parsing and discovery.

A *device* is a ``torch.device`` inside one process; its *device index* is its CUDA ordinal.  Users
name devices many ways (``0``, ``"1"``, ``"cuda:1"``, ``"cpu"``, ``torch.device("cuda", 2)``); every
gpucomm entry point funnels them through :func:`parse_device` so that the rules, and the error
messages, are the same everywhere.

Availability is probed once per process (:func:`cuda_device_count` is cached): asking CUDA is not
free, and the answer does not change while a process runs.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable

import torch

__all__ = [
    "DeviceLike",
    "cuda_available",
    "cuda_device_count",
    "default_devices",
    "parse_device",
    "parse_devices",
]

DeviceLike = int | str | torch.device


@functools.cache
def cuda_device_count() -> int:
    """Number of visible CUDA devices (0 without CUDA); probed once per process."""
    try:
        return torch.cuda.device_count() if torch.cuda.is_available() else 0
    except Exception:  # a broken driver is "no GPU", not a crash at import
        return 0


def cuda_available() -> bool:
    """True when at least one CUDA device is visible."""
    return cuda_device_count() > 0


def parse_device(device: DeviceLike, *, arg: str = "device", allow_cpu: bool = True) -> torch.device:
    """Turn ``0``, ``"0"``, ``"cuda:1"``, ``"cpu"`` or a ``torch.device`` into a ``torch.device``.

    Integers and bare digit strings are CUDA ordinals.  A CUDA device without an index means the
    current CUDA device.  ``-1`` is *not* accepted here (torch's deprecated spelling of "CPU" is
    handled only where torch accepts it, with torch's warning).

    Raises:
        TypeError: ``device`` is not an int, str or torch.device.
        ValueError: the index is negative, the string is not a device, or CPU is not allowed.
    """
    if isinstance(device, bool) or not isinstance(device, int | str | torch.device):
        raise TypeError(
            f"{arg}: expected an int, str or torch.device, but got {type(device).__name__} {device!r}; "
            f"pass e.g. 0, 'cuda:0' or 'cpu'"
        )
    if isinstance(device, int) or (isinstance(device, str) and device.lstrip("-").isdigit()):
        index = int(device)
        if index < 0:
            raise ValueError(f"{arg}: expected a non-negative device index, but got {index}; "
                             f"CUDA devices are numbered from 0")
        dev = torch.device("cuda", index)
    elif isinstance(device, str):
        try:
            dev = torch.device(device)
        except RuntimeError:
            raise ValueError(f"{arg}: {device!r} is not a device; expected e.g. 0, 'cuda:1' or 'cpu'") from None
    else:
        dev = device
    if dev.type == "cuda" and dev.index is None and cuda_available():
        dev = torch.device("cuda", torch.cuda.current_device())
    if dev.type == "cpu" and not allow_cpu:
        raise ValueError(f"{arg}: expected a CUDA device, but got {dev}")
    return dev


def parse_devices(devices: Iterable[DeviceLike], *, arg: str = "devices") -> list[torch.device]:
    """Parse a sequence of devices; each error names the offending position (``devices[2]``)."""
    if isinstance(devices, int | str | torch.device):
        raise TypeError(f"{arg}: expected a sequence of devices, but got a single {type(devices).__name__} "
                        f"{devices!r}; wrap it in a list: [{devices!r}]")
    try:
        items = list(devices)
    except TypeError:
        raise TypeError(f"{arg}: expected a sequence of devices, but got {type(devices).__name__}") from None
    return [parse_device(d, arg=f"{arg}[{i}]") for i, d in enumerate(items)]


def default_devices(n: int | None = None) -> list[torch.device]:
    """All visible CUDA devices, or ``n`` CPU devices (default 4) when there is no GPU.

    With a GPU and an ``n`` larger than the device count, devices are repeated round-robin; that is
    how the single-GPU machine exercises multi-device code paths (``[cuda:0, cuda:0, ...]``).
    """
    count = cuda_device_count()
    if count == 0:
        return [torch.device("cpu")] * (4 if n is None else n)
    k = count if n is None else n
    return [torch.device("cuda", i % count) for i in range(k)]
