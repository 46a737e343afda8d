"""``spawn``: run a test body in 2–4 gloo processes on this machine, the way gpucomm's own tests do.

Usage::

    from gpucomm.testing import spawn, check_ranks

    def _body(size):                        # module level: the workers import it
        t = torch.full((size,), float(gpucomm.dist.get_rank()))
        gpucomm.dist.all_reduce(t)
        return [] if t.eq(sum(range(gpucomm.dist.get_world_size()))).all() else [f"got {t}"]

    def test_all_reduce():
        check_ranks(spawn(_body, 8, world_size=4))

It is :func:`gpucomm.dist.launch` with test-friendly defaults: gloo even where GPUs exist, a short
timeout, and a failure that names the rank and carries its traceback (pytest shows it).  Spawning
costs about two seconds a process (each imports torch), so put many checks into one body and
return what went wrong rather than launching once per check.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from gpucomm.dist.launch import launch

__all__ = ["check_ranks", "spawn"]

DEFAULT_TIMEOUT = 120.0
"""Seconds a spawned test body may run (start-up gets as long again) before its ranks are stopped."""


def spawn(fn: Callable, *args: Any, world_size: int = 2, backend: str = "gloo",
          timeout: float = DEFAULT_TIMEOUT, debug_check: bool | None = None,
          allow_oversubscribe: bool = False) -> list:
    """Run ``fn(*args)`` on ``world_size`` local ranks with a ``backend`` process group; results by rank.

    Args:
        fn: a module-level function (a test file's is fine: it is loaded from its file).
        *args: passed to ``fn`` on every rank.
        world_size: ranks to start (2–4 are what a 2-core CI machine runs well).
        backend: "gloo" (default) or "nccl".
        timeout: seconds before hung ranks are stopped.
        debug_check: turn the cross-rank shape check on (True) or off (False) in the workers.
        allow_oversubscribe: start more ranks than :func:`gpucomm.dist.launch` allows by default
            (4 per CPU core on gloo).

    Raises:
        gpucomm.dist.LaunchError: a rank raised, died or hung.
    """
    if isinstance(world_size, bool) or not isinstance(world_size, int) or world_size < 1:
        raise ValueError(f"world_size: expected an int >= 1, but got {world_size!r}")
    return launch(fn, world_size, *args, backend=backend, timeout=timeout, debug_check=debug_check,
                  allow_oversubscribe=allow_oversubscribe)


def check_ranks(results: Sequence[Sequence[str]]) -> None:
    """Fail (AssertionError) listing every rank's problems, when bodies return lists of them."""
    problems = [f"rank {r}: {p}" for r, ps in enumerate(results) for p in ps]
    if problems:
        shown = problems[:40] + ([f"... and {len(problems) - 40} more"] if len(problems) > 40 else [])
        raise AssertionError(f"{len(problems)} problem(s):\n" + "\n".join(shown))
