"""The opt-in cross-rank check: before a collective, every rank's shapes and dtypes must agree.

A collective whose ranks pass tensors of different shapes or dtypes does not fail cleanly: gloo
and NCCL read or write past the smaller buffer, hang, or return garbage.  With the check on, every
:mod:`gpucomm.dist` collective first gathers each rank's tensor descriptions
(``all_gather_object``) and, when they disagree, raises :class:`CollectiveMismatchError` on every
rank with one line per rank (accelerate's ``verify_operation`` does the same)::

    gpucomm.dist.all_reduce: the ranks disagree on their tensors (GPUCOMM_DEBUG_CHECK=1)
      rank 0: tensor=float32[4]
      rank 1: tensor=float32[5]   <-- differs from rank 0

Turn it on with ``GPUCOMM_DEBUG_CHECK=1`` in the environment, :func:`set_debug_check`, or
``gpucomm.dist.launch(..., debug_check=True)``.

.. note:: The check costs one extra ``all_gather_object`` (a pickle and two collectives) per
   collective; it is for finding bugs, never for timing.
"""

from __future__ import annotations

import functools
import operator
import os
from collections.abc import Mapping

import torch
import torch.distributed as td

__all__ = ["ENV_VAR", "CollectiveMismatchError", "debug_check_enabled", "set_debug_check", "verify"]

ENV_VAR = "GPUCOMM_DEBUG_CHECK"
"""Set to ``1`` to turn the check on in every process that inherits the environment."""

_override: list[bool | None] = [None]


class CollectiveMismatchError(ValueError):
    """The ranks of one collective passed tensors of different shapes or dtypes."""


def set_debug_check(enabled: bool | None) -> None:
    """Turn the check on (True) or off (False) in this process; None defers to ``GPUCOMM_DEBUG_CHECK``."""
    if enabled is not None and not isinstance(enabled, bool):
        raise TypeError(f"enabled: expected True, False or None, but got {type(enabled).__name__} {enabled!r}")
    _override[0] = enabled
    maybe_on[0] = _env_set if enabled is None else _yes


def debug_check_enabled() -> bool:
    """True when the check is on: :func:`set_debug_check` if called, else ``GPUCOMM_DEBUG_CHECK``.

    .. note:: Every collective asks, so this is on the hot path: the variable is read on every call
       (setting it at run time still works) but straight from ``os.environ``'s dict, and its text is
       parsed once per distinct value; ``os.environ.get`` and the parse cost ~1 us a call.
    """
    override = _override[0]
    if override is not None:
        return override
    env = os.environ
    raw = _ENV_DATA.get(_ENV_KEY) if env is _ENVIRON else env.get(ENV_VAR)
    try:
        return _PARSED[raw]
    except KeyError:
        return _parse_env(raw)


def _parse_env(raw: str | bytes | None) -> bool:
    text = raw.decode(errors="replace") if isinstance(raw, bytes) else (raw or "")
    on = text.strip().lower() in {"1", "true", "yes", "on"}
    if len(_PARSED) > 64:  # values are few in practice; never let the cache grow without bound
        _PARSED.clear()
    _PARSED[raw] = on
    return on


def _environ_dict() -> tuple[object, dict | None, object]:
    """``os.environ``, its backing dict and our variable's key there (None: read through ``.get``)."""
    env = os.environ
    data, encode = getattr(env, "_data", None), getattr(env, "encodekey", None)
    if not isinstance(data, dict) or encode is None:
        return None, None, None
    return env, data, encode(ENV_VAR)


_ENVIRON, _ENV_DATA, _ENV_KEY = _environ_dict()
_PARSED: dict[object, bool] = {}  # the variable's raw value -> on/off


def _yes() -> bool:
    return True


# whether the variable is in os.environ's dict: one C call (a partial of dict.__contains__), no Python frame
_env_set = _yes if _ENV_DATA is None else functools.partial(operator.contains, _ENV_DATA, _ENV_KEY)
maybe_on: list = [_env_set]
"""``maybe_on[0]()`` is False only when the check is surely off: no :func:`set_debug_check` override and no
``GPUCOMM_DEBUG_CHECK`` in the environment, as long as ``os.environ`` is still the object it was at import
(a caller tests that too).  The collectives ask it first, a C call of a few hundred host instructions, and
only then :func:`debug_check_enabled` (a Python call, about four times as many)."""


def _describe(t: torch.Tensor | None) -> str:
    if t is None:
        return "None"
    return f"{str(t.dtype).removeprefix('torch.')}{list(t.shape)}"


def verify(name: str, group: td.ProcessGroup | None, tensors: Mapping[str, torch.Tensor | None]) -> None:
    """Raise :class:`CollectiveMismatchError` on every rank unless all ranks' descriptions agree.

    Args:
        name: the collective, for the message.
        group: the process group the collective runs on (None: the default group).
        tensors: the tensors whose shape and dtype must match across ranks, by argument name.
    """
    mine = ", ".join(f"{k}={_describe(v)}" for k, v in tensors.items())
    everyone: list[str | None] = [None] * td.get_world_size(group)
    td.all_gather_object(everyone, mine, group=group)
    if all(d == everyone[0] for d in everyone):
        return
    lines = [f"gpucomm.dist.{name}: the ranks disagree on their tensors ({ENV_VAR}=1 check)"]
    for r, d in enumerate(everyone):
        mark = "" if d == everyone[0] else "   <-- differs from rank 0"
        lines.append(f"  rank {r}: {d}{mark}")
    lines.append("every rank must pass tensors of the same shape and dtype to a collective")
    raise CollectiveMismatchError("\n".join(lines))
