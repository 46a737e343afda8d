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

import atexit
import contextlib
import queue
import threading
import weakref
from collections.abc import Callable
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


def _work(inbox: queue.SimpleQueue, done: queue.SimpleQueue, replica: int) -> None:
    """A replica thread: run ``(fn, state)`` jobs until a None arrives (it holds no reference to the pool)."""
    while (job := inbox.get()) is not None:
        fn, state = job
        try:
            with contextlib.ExitStack() as stack:
                state.enter(stack)
                done.put((replica, True, fn(replica)))
        except BaseException as exc:  # handed to the caller, which re-raises it
            done.put((replica, False, exc))


def _stop(inboxes: list[queue.SimpleQueue], threads: list[threading.Thread]) -> None:
    for inbox in inboxes:
        inbox.put(None)
    if threading.current_thread() not in threads:
        for t in threads:
            t.join(timeout=5.0)


_LIVE: weakref.WeakSet = weakref.WeakSet()


@atexit.register
def _stop_all() -> None:
    """Stop every pool's threads before the interpreter tears down (daemon threads killed in C++ code can abort)."""
    for pool in list(_LIVE):
        pool.close()


class ReplicaThreads:
    """One persistent daemon thread per replica; :meth:`map` runs ``fn(r)`` for every replica at once.

    Daemon threads that hold no reference to their owner: when the owner is collected (or :meth:`close`
    is called) they are told to stop, and they never keep the interpreter from exiting.

    Args:
        n: replicas (threads).
    """

    def __init__(self, n: int) -> None:
        self.n = n
        self._inbox = [queue.SimpleQueue() for _ in range(n)]
        self._done: queue.SimpleQueue = queue.SimpleQueue()
        threads = [threading.Thread(target=_work, args=(self._inbox[r], self._done, r), daemon=True,
                                    name=f"gpucomm-replica-{r}") for r in range(n)]
        for t in threads:
            t.start()
        self._finalizer = weakref.finalize(self, _stop, self._inbox, threads)
        _LIVE.add(self)

    def map(self, fn: Callable[[int], Any]) -> list[Any]:
        """``[fn(0), ..., fn(n-1)]``, each in its replica's thread under the caller's :class:`CallerState`.

        Every replica finishes before this returns; an exception in one is re-raised here (the first by
        replica order), noted with the replica.
        """
        if not self._finalizer.alive:
            raise RuntimeError("ReplicaThreads: closed")
        state = CallerState.capture()
        for inbox in self._inbox:
            inbox.put((fn, state))
        results: list[Any] = [None] * self.n
        errors: dict[int, BaseException] = {}
        for _ in range(self.n):
            r, ok, value = self._done.get()
            if ok:
                results[r] = value
            else:
                errors[r] = value
        if errors:
            r = min(errors)
            exc = errors[r]
            if hasattr(exc, "add_note"):
                exc.add_note(f"(raised in replica {r}'s forward)")
            raise exc
        return results

    def close(self) -> None:
        """Stop the threads (idempotent)."""
        self._finalizer()
