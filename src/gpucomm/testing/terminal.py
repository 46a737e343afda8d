"""Run a command in a real (pseudo-)terminal of a fixed size and read back what a person would see.

A command's terminal output — live progress bars that redraw, tables laid out for the width, answers
at the end — is only really tested by a terminal: :func:`run_in_pty` runs ``argv`` with a
pseudo-terminal of ``cols`` × ``rows`` as stdin, stdout and stderr and returns every byte it wrote;
:func:`screen_lines` replays them through ``pyte`` (a VT100 emulator, the ``dev`` extra) and returns the
final screen with its scrollback, one string per line.  POSIX only.
"""

from __future__ import annotations

import os
import select
import subprocess
from collections.abc import Mapping, Sequence

__all__ = ["run_in_pty", "screen_lines"]


def run_in_pty(argv: Sequence[str], cols: int, rows: int, *, env: Mapping[str, str] | None = None,
               silence_s: float = 120.0) -> tuple[int, bytes]:
    """Run ``argv`` in a ``cols`` × ``rows`` pseudo-terminal; return (exit status, bytes written).

    Raises:
        TimeoutError: the command wrote nothing for ``silence_s`` seconds (it is killed first).
    """
    import fcntl
    import struct
    import termios

    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    proc = subprocess.Popen(list(argv), stdin=slave, stdout=slave, stderr=slave,
                            env=dict(env) if env is not None else None, close_fds=True)
    os.close(slave)
    chunks = []
    try:
        while True:
            ready, _, _ = select.select([master], [], [], silence_s)
            if not ready:
                proc.kill()
                raise TimeoutError(f"{' '.join(argv)} wrote nothing for {silence_s:g} s")
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the child closed its end
                break
            if not data:
                break
            chunks.append(data)
    finally:
        os.close(master)
        proc.wait(timeout=60)
    return proc.returncode, b"".join(chunks)


def screen_lines(data: bytes, cols: int, rows: int) -> list[str]:
    """Every line on the final screen and in the scrollback after replaying ``data`` (right-stripped)."""
    import pyte

    screen = pyte.HistoryScreen(cols, rows, history=100_000, ratio=0.5)
    screen.set_mode(pyte.modes.LNM)  # a pty turns "\n" into "\r\n"; the emulator must too
    pyte.ByteStream(screen).feed(data)
    top = ["".join(line[x].data for x in range(cols)).rstrip() for line in screen.history.top]
    return top + [line.rstrip() for line in screen.display]
