"""The checks :class:`~gpucomm.parallel.ReplicatedDataParallel` makes before it builds anything.

Each failure is one line that names the argument, says what was expected and what came, and how to fix
it (``TypeError`` for a wrong type, ``ValueError`` for a wrong value), raised before any replica, buffer,
hook or optimizer exists and before the user's module is touched.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import nn

from gpucomm._validate import fail_type, fail_value
from gpucomm.communicator import Communicator
from gpucomm.devices import parse_device, parse_devices

__all__ = [
    "check_communicator",
    "check_devices",
    "check_flag",
    "check_module",
    "check_optimizer",
    "check_optimizer_result",
    "check_positive",
    "names",
]


def check_devices(devices: Any) -> list[torch.device]:
    """A non-empty list of devices of one type (repeats allowed: ``["cpu"] * 3``, ``["cuda:0"] * 2``)."""
    parsed = parse_devices(devices)
    if not parsed:
        raise fail_value("devices", "at least one device", "an empty sequence",
                         "pass e.g. ['cuda:0', 'cuda:1'] (or ['cpu', 'cpu'] to try it on the CPU)")
    types = list(dict.fromkeys(d.type for d in parsed))
    if len(types) > 1:
        raise fail_value("devices", "devices of one type", f"{[str(d) for d in parsed]} ({' and '.join(types)})",
                         "list only CUDA devices, or only 'cpu' entries to test on the CPU")
    return parsed


def check_module(module: Any, device: torch.device) -> None:
    """An ``nn.Module`` whose parameters and buffers all live on ``device`` (the first replica's)."""
    if not isinstance(module, nn.Module):
        raise fail_type("module", "a torch.nn.Module", module, "pass the model itself")
    if isinstance(module, nn.DataParallel | nn.parallel.DistributedDataParallel):
        raise TypeError(f"module: expected a plain torch.nn.Module, but got a {type(module).__name__} wrapper; pass "
                        f"the module inside it (its .module)")
    tensors = list(module.named_parameters()) + list(module.named_buffers())
    if not any(p.requires_grad for _, p in module.named_parameters()):
        raise fail_value("module", "a module with parameters that require grad", "none",
                         "there is nothing to train: check requires_grad, or use the module directly for inference")
    places = {}
    for name, t in tensors:
        places.setdefault(t.device, name)
    if len(places) > 1:
        listed = ", ".join(f"{d} ({name!r})" for d, name in places.items())
        raise fail_value("module", f"every parameter and buffer on one device, the first replica's {device}",
                         f"tensors on {listed}", "replicate a single-device module: move it whole with "
                         f"module.to({str(device)!r}) (a module split over devices cannot be replicated)")
    (where, name), = places.items()
    if where != device:
        raise fail_value("module", f"parameters on {device}, the first replica's device", f"{where} (e.g. {name!r})",
                         f"call module.to({str(device)!r}) before wrapping, or list {where} first in devices")


def check_optimizer(optimizer: Any, kwargs: dict[str, Any]) -> None:
    """An optimizer class (``torch.optim.AdamW``) or a factory ``params -> Optimizer``, never an instance."""
    if isinstance(optimizer, torch.optim.Optimizer):
        name = type(optimizer).__name__
        raise TypeError(f"optimizer: expected an optimizer class or a factory params -> Optimizer (each replica "
                        f"gets its own optimizer), but got an instance of {name}; pass the class and its arguments, "
                        f"e.g. ReplicatedDataParallel(module, devices, torch.optim.{name}, lr=...)")
    if not callable(optimizer):
        raise fail_type("optimizer", "an optimizer class or a factory params -> Optimizer", optimizer,
                        "pass e.g. torch.optim.AdamW and its arguments as keywords")


def check_optimizer_result(result: Any, params: Sequence[torch.Tensor], replica: int) -> list[list[int]]:
    """The optimizer the factory built for ``params``: its groups as indices into ``params``.

    Raises:
        TypeError: not an Optimizer.
        ValueError: it optimizes tensors that are not ``params``.
    """
    if not isinstance(result, torch.optim.Optimizer):
        raise fail_type("optimizer", "a factory that returns a torch.optim.Optimizer", result,
                        "return the optimizer built on the parameters the factory is given")
    index = {id(p): i for i, p in enumerate(params)}
    groups = []
    for g in result.param_groups:
        ids = [index.get(id(p)) for p in g["params"]]
        if None in ids:
            raise fail_value("optimizer", f"an optimizer over replica {replica}'s parameters (the ones the factory "
                             f"is given)", "one that optimizes other tensors",
                             "build it from the params argument only, never from a captured module")
        groups.append(ids)
    return groups


def check_communicator(communicator: Any, devices: list[torch.device]) -> None:
    """None, a Communicator over ``devices`` (one process), or one across processes holding ``devices[0]``."""
    if communicator is None:
        return
    if not isinstance(communicator, Communicator):
        raise fail_type("communicator", "a gpucomm Communicator or None", communicator,
                        "pass e.g. gpucomm.ProcessGroupCommunicator(device=devices[0]), or leave it out")
    held = [str(d) for d in communicator.devices]
    if communicator.world_size == 1:
        if held != [str(d) for d in devices]:
            raise fail_value("communicator", f"a one-process communicator over devices {[str(d) for d in devices]}",
                             f"one over {held}", "build it over the same devices, or leave it out")
    elif held != [str(devices[0])]:
        raise fail_value("communicator", f"a process-group communicator holding this process's first replica "
                         f"device {devices[0]}", f"one holding {held}",
                         f"build it with ProcessGroupCommunicator(device={str(devices[0])!r})")


def check_flag(value: Any, arg: str, *, optional: bool = False) -> None:
    if value is None and optional:
        return
    if not isinstance(value, bool):
        raise fail_type(arg, "True or False" + (" (or None)" if optional else ""), value)


def check_positive(value: Any, arg: str, *, optional: bool = False) -> None:
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise fail_type(arg, "a positive number" + (" or None" if optional else ""), value)
    if not math.isfinite(value) or value <= 0:
        raise fail_value(arg, "a positive finite number", repr(value))


def check_output_device(device: Any, devices: list[torch.device]) -> torch.device | None:
    if device is None:
        return None
    parsed = parse_device(device, arg="output_device")
    if parsed.type != devices[0].type:
        raise fail_value("output_device", f"a {devices[0].type} device like the replicas'", str(parsed),
                         "gather onto one of the replicas' devices, or leave it out")
    return parsed


def check_callable(fn: Any, arg: str, example: str) -> Callable:
    if not callable(fn):
        raise fail_type(arg, "a callable", fn, f"pass e.g. {example}")
    return fn


def names(module: nn.Module, params: Sequence[torch.Tensor]) -> list[str]:
    """The name of each of ``params`` in ``module`` (its first name, for tied parameters)."""
    by_id: dict[int, str] = {}
    for name, p in module.named_parameters(remove_duplicate=False):
        by_id.setdefault(id(p), name)
    return [by_id.get(id(p), f"parameter {i}") for i, p in enumerate(params)]
