"""Ctrl-C and SIGTERM for commands that keep what they finished: one interrupt stops the work, a second
cannot stop the clean-up.

``gpucomm bench`` and ``gpucomm train`` write each finished row as it comes and, when interrupted,
still close the records and write the report.  Python turns SIGINT into ``KeyboardInterrupt`` wherever
the main thread is — also inside that clean-up, where a second Ctrl-C (people press it twice) would
print a traceback and leave no report.  Inside :func:`interrupts`:

* the first SIGINT or SIGTERM raises ``KeyboardInterrupt`` (SIGTERM too, so a scheduler's stop keeps
  the rows as Ctrl-C does) and records which signal it was;
* from then on both signals are ignored until the block ends, so the clean-up runs to the end.
  (SIGKILL still stops a clean-up that hangs.)

Outside the main thread signals cannot be handled; the block then changes nothing.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator

__all__ = ["EXIT_STATUS", "Interrupted", "ignore_interrupts", "interrupts"]

EXIT_STATUS: dict[int, int] = {signal.SIGINT: 130, signal.SIGTERM: 143}
"""The shell's exit status for a process stopped by each signal (128 + its number)."""


class Interrupted:
    """Which signal stopped the block (``signal.SIGINT`` or ``signal.SIGTERM``), or None."""

    signum: int | None = None

    @property
    def name(self) -> str:
        """"SIGINT" or "SIGTERM" (SIGINT when the interrupt was raised by other code)."""
        return signal.Signals(self.signum).name if self.signum else "SIGINT"

    @property
    def exit_status(self) -> int:
        """130 for SIGINT (and for an interrupt raised by other code), 143 for SIGTERM."""
        return EXIT_STATUS.get(self.signum or signal.SIGINT, 130)


def ignore_interrupts() -> None:
    """Ignore SIGINT and SIGTERM from now on (outside the main thread: do nothing)."""
    for s in EXIT_STATUS:
        with contextlib.suppress(ValueError):
            signal.signal(s, signal.SIG_IGN)


@contextlib.contextmanager
def interrupts() -> Iterator[Interrupted]:
    """Within the block the first SIGINT/SIGTERM raises ``KeyboardInterrupt``; later ones are ignored.

    Yields an :class:`Interrupted` that says which signal came.  The previous handlers come back when
    the block ends.
    """
    state = Interrupted()

    def handler(signum, frame):
        state.signum = signum
        ignore_interrupts()
        raise KeyboardInterrupt(f"signal {signum}")

    try:
        previous = {s: signal.signal(s, handler) for s in EXIT_STATUS}
    except ValueError:  # not the main thread: leave signals alone
        yield state
        return
    try:
        yield state
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
