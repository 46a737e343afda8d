"""The width every ``gpucomm`` command prints at, and the rich console that uses it.

One rule for every command (bench, train, advise, report, topo, help), so that a person who sets
``COLUMNS`` gets that width everywhere, and a pipe gets the same output whichever command wrote it:

1. ``COLUMNS`` set to a whole number (at least :data:`MIN_WIDTH`): that width, terminal or not.  A
   shell sets it for its own terminal; a user sets it to shape piped output (``COLUMNS=80 gpucomm
   advise … | cat``) or a log file.
2. Otherwise, when the stream is a terminal: the terminal's width.
3. Otherwise (a pipe, a file, CI): :data:`PIPED_WIDTH` columns, wide enough that tables keep their
   answer columns and notes without wrapping, narrow enough to read in a log viewer.

Imports nothing heavy: ``--help`` uses :func:`console_width` without importing rich or torch.
"""

from __future__ import annotations

import os
import sys
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["MIN_WIDTH", "PIPED_WIDTH", "console_width", "make_console"]

PIPED_WIDTH = 120
"""Columns for output that is not a terminal and has no ``COLUMNS``."""

MIN_WIDTH = 20
"""A ``COLUMNS`` below this is ignored (no table or sentence lays out in fewer columns)."""


def console_width(stream: IO[str] | None = None) -> int:
    """The width to print at on ``stream`` (default ``sys.stdout``): ``COLUMNS``, the terminal's, or 120.

    See the module docstring for the rule.  Never raises: a stream without a file descriptor (a test's
    ``StringIO``) counts as not a terminal.
    """
    columns = os.environ.get("COLUMNS", "").strip()
    if columns.isdigit() and int(columns) >= MIN_WIDTH:
        return int(columns)
    stream = sys.stdout if stream is None else stream
    try:
        if stream.isatty():
            return os.get_terminal_size(stream.fileno()).columns
    except (AttributeError, OSError, ValueError):  # no fileno, closed, or not a terminal after all
        pass
    return PIPED_WIDTH


def make_console(*, stderr: bool = False, **kwargs: Any) -> Console:
    """A ``rich.console.Console`` on stdout (or stderr) at :func:`console_width`'s width.

    Keyword arguments go to ``Console`` (``highlight=False``, ``record=True``…); a ``width`` given
    there wins (tests pin one).
    """
    from rich.console import Console

    stream = kwargs.get("file") or (sys.stderr if stderr else sys.stdout)
    kwargs.setdefault("width", console_width(stream))
    return Console(stderr=stderr, **kwargs)
