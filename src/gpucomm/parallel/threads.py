"""Running every replica's forward at once: a persistent thread per replica, in the caller's autocast and grad mode.

One Python thread launching every replica's kernels one after another leaves the other GPUs idle
while it works on one; a thread per replica lets the launches overlap (PyTorch releases the GIL inside
its operators).  ``nn.DataParallel`` starts new threads on every forward; these are made once.

Grad mode, inference mode and autocast are **thread-local** in PyTorch, so a worker thread does not
see the caller's ``with torch.autocast(...)``.  DataParallel forwards whether autocast is *enabled*
but not its dtype, so its replicas run fp16 under the caller's bf16 (PyTorch's AMP notes tell users
to put autocast inside ``forward`` for that reason).  :class:`CallerState` carries the whole state —
grad mode, inference mode, and per device type whether autocast is on, its dtype and its cache
setting — and each worker enters it, so the caller's context simply works.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import torch

__all__ = ["AUTOCAST_DEVICE_TYPES", "CallerState", "ReplicaThreads"]

AUTOCAST_DEVICE_TYPES = ("cuda", "cpu")
"""Device types whose autocast state is carried into worker threads and CUDA-graph captures."""


@dataclass(frozen=True, slots=True)
class CallerState:
    """The thread-local state a replica's forward must run in: the caller's."""

    grad: bool
    """``torch.is_grad_enabled()``."""
    inference: bool
    """``torch.is_inference_mode_enabled()``."""
    autocast: tuple[tuple[str, torch.dtype], ...]
    """``(device type, dtype)`` for every device type whose autocast is enabled."""
    cache: bool
    """``torch.is_autocast_cache_enabled()``."""

    @classmethod
    def capture(cls) -> CallerState:
        """The calling thread's state."""
        return cls(grad=torch.is_grad_enabled(), inference=torch.is_inference_mode_enabled(),
                   autocast=tuple((t, torch.get_autocast_dtype(t)) for t in AUTOCAST_DEVICE_TYPES
                                  if torch.is_autocast_enabled(t)),
                   cache=torch.is_autocast_cache_enabled())

    def enter(self, stack: contextlib.ExitStack, *, cache: bool | None = None) -> None:
        """Enter this state in the current thread, on ``stack`` (``cache`` overrides the autocast cache:
        CUDA graphs need it off)."""
        if self.inference:
            stack.enter_context(torch.inference_mode())
        elif torch.is_grad_enabled() != self.grad:
            stack.enter_context(torch.set_grad_enabled(self.grad))
        for device_type, dtype in self.autocast:
            stack.enter_context(torch.autocast(device_type, dtype=dtype,
                                               cache_enabled=self.cache if cache is None else cache))

    def without_autocast(self) -> contextlib.AbstractContextManager:
        """A context with the caller's autocast turned off (backward and the optimizer run outside autocast,
        as PyTorch's AMP recipe prescribes)."""
        if not self.autocast:
            return contextlib.nullcontext()
        stack = contextlib.ExitStack()
        for device_type, _ in self.autocast:
            stack.enter_context(torch.autocast(device_type, enabled=False))
        return stack


def _run(state: CallerState, fn: Callable[[int], Any], replica: int) -> Any:
    with contextlib.ExitStack() as stack:
        state.enter(stack)
        return fn(replica)


class ReplicaThreads:
    """A persistent pool of one thread per replica; :meth:`map` runs ``fn(r)`` for every replica at once.

    Args:
        n: replicas (threads).
    """

    def __init__(self, n: int) -> None:
        self.n = n
        self._pool = ThreadPoolExecutor(max_workers=n, thread_name_prefix="gpucomm-replica")
        self._finalizer = weakref.finalize(self, self._pool.shutdown, wait=False)

    def map(self, fn: Callable[[int], Any]) -> list[Any]:
        """``[fn(0), ..., fn(n-1)]``, each in its own thread under the caller's :class:`CallerState`.

        An exception in a replica is re-raised here (the first, by replica order), noted with the replica.
        """
        state = CallerState.capture()
        futures = [self._pool.submit(_run, state, fn, r) for r in range(self.n)]
        results, error = [], None
        for r, f in enumerate(futures):
            try:
                results.append(f.result())
            except BaseException as exc:  # re-raised below, after every replica finished
                if error is None:
                    if hasattr(exc, "add_note"):
                        exc.add_note(f"(raised in replica {r}'s forward)")
                    error = exc
        if error is not None:
            raise error
        return results

    def close(self) -> None:
        """Stop the threads (idempotent)."""
        self._finalizer()
