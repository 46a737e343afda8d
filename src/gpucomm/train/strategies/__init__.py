"""Training strategies: siblings with one interface, found by name in a registry.

``STRATEGIES`` maps a name to its class.  Adding a strategy (FSDP, ZeRO, …) is one new module with a
:class:`~gpucomm.train.strategies.base.Strategy` subclass and one :func:`register` call; the loop,
the comparison and the CLI pick it up by name without changes::

    from gpucomm.train.strategies import Strategy, register

    @register
    class FSDPStrategy(Strategy):
        name = "fsdp"

        @classmethod
        def needs_process_group(cls, config): return True
        @classmethod
        def world_size(cls, config): return len(cls.devices_needed(config))
        ...

What a strategy says about itself (devices, processes, notes, applicability) is asked once, by
:func:`gpucomm.train.plan.resolve`; a strategy that ``needs_process_group`` is started under
torch.distributed (as ``ddp`` is), the others run in the calling process on their devices.
"""

from __future__ import annotations

from gpucomm.train.strategies.base import StepResult, Strategy
from gpucomm.train.strategies.ddp import DDPStrategy
from gpucomm.train.strategies.dp import DataParallelStrategy
from gpucomm.train.strategies.replicated import ReplicatedStrategy
from gpucomm.train.strategies.single import SingleStrategy

__all__ = ["STRATEGIES", "DDPStrategy", "DataParallelStrategy", "ReplicatedStrategy", "SingleStrategy", "StepResult",
           "Strategy", "get", "names", "register"]

STRATEGIES: dict[str, type[Strategy]] = {}


def register(cls: type[Strategy]) -> type[Strategy]:
    """Add a strategy class under ``cls.name`` (usable as a decorator); a taken name raises ValueError."""
    if not (isinstance(cls, type) and issubclass(cls, Strategy)):
        raise TypeError(f"register: expected a Strategy subclass, but got {cls!r}")
    name = getattr(cls, "name", None)
    if not isinstance(name, str) or not name:
        raise ValueError(f"register: {cls.__name__} needs a non-empty str class attribute 'name'")
    if name in STRATEGIES and STRATEGIES[name] is not cls:
        raise ValueError(f"register: the strategy name {name!r} is taken by {STRATEGIES[name].__name__}")
    STRATEGIES[name] = cls
    return cls


for _cls in (SingleStrategy, DataParallelStrategy, ReplicatedStrategy, DDPStrategy):
    register(_cls)


def names() -> list[str]:
    """Registered strategy names, in registration order."""
    return list(STRATEGIES)


def get(name: str) -> type[Strategy]:
    """The strategy class called ``name``; an unknown name raises ValueError listing the valid ones."""
    try:
        return STRATEGIES[name]
    except KeyError:
        raise ValueError(f"unknown strategy {name!r}; valid names are: {', '.join(STRATEGIES)}") from None
