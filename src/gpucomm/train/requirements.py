"""A comparison's strategy requirements, resolved once: for each name, its class and what it needs.

The CLI (and :func:`gpucomm.train.compare.run_comparison` when called as a library) asks every strategy
**here and only here** which devices it needs, how many processes it runs in, whether it needs a
process group, what its notes are and whether it applies at all.  Everything downstream (the loop,
launching, the records) reads the :class:`StrategyRequirements`; nothing else dispatches on strategy names.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from gpucomm.train.config import ConfigError, TrainConfig
from gpucomm.train.strategies import Strategy, get, names

__all__ = ["StrategyRequirements", "resolve"]


@dataclass(kw_only=True, slots=True)
class StrategyRequirements:
    """One strategy of a comparison, resolved against its config before anything is built."""

    name: str
    cls: type[Strategy]
    devices: list[torch.device]
    """Every device it trains on, over all its processes (``cls.devices_needed(config)``)."""
    world_size: int
    """Processes it runs in."""
    process_group: bool
    """Whether it runs under torch.distributed (launched locally, or across torchrun's job)."""
    notes: list[str] = field(default_factory=list)
    """What a reader of its row must know (``cls.notes(config)``)."""
    not_applicable: str | None = None
    """Why it cannot run here, or None."""


def resolve(config: TrainConfig) -> list[StrategyRequirements]:
    """Resolve ``config.strategies`` in order; raises :class:`ConfigError` on anything that cannot run.

    Raises:
        ConfigError: an unknown strategy name; a global batch that does not divide by a strategy's
            devices; devices that do not split evenly over a strategy's processes.
    """
    valid = names()
    unknown = [s for s in config.strategies if s not in valid]
    if unknown:
        raise ConfigError(f"--strategies: unknown strategy {', '.join(map(repr, unknown))}; "
                          f"valid names are: {', '.join(valid)}")
    resolved = []
    for name in config.strategies:
        cls = get(name)
        reason = cls.not_applicable(config)
        try:
            devices = cls.devices_needed(config)
            world = cls.world_size(config)
        except ValueError as exc:  # ConfigError included
            raise ConfigError(str(exc)) from None
        if reason is None:
            _check_split(name, devices, world, config)
        resolved.append(StrategyRequirements(name=name, cls=cls, devices=devices, world_size=world,
                                     process_group=cls.needs_process_group(config),
                                     notes=list(cls.notes(config)), not_applicable=reason))
    return resolved


def _check_split(name: str, devices: list[torch.device], world: int, config: TrainConfig) -> None:
    n = len(devices)
    if not n:
        raise ConfigError(f"strategy {name!r} needs at least one device; check --devices")
    if config.global_batch % n:
        raise ConfigError(f"--global-batch {config.global_batch} does not divide by the {n} devices of "
                          f"strategy {name!r}; choose a multiple of {n}")
    if n % world:
        raise ConfigError(f"strategy {name!r}: its {n} devices do not split evenly over {world} processes; "
                          f"list a multiple of {world} devices or change --nproc")
