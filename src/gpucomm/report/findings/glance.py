"""An answer at a glance: at most :data:`MAX_LINES` lines on the screen, at whatever width the terminal has.

Every command ends with its answer, and the issue that asked for it set the bound a person reads at a glance:
five lines on the screen — screen lines, at the terminal's width (80 columns as well as 120), not sentences.
A finding that says everything (each op with its speedup and sizes) does not fit there, so each command's
findings offer their answer at several levels of detail, most detailed first, and :func:`fit` keeps the
first that fits; the full detail stays in the report.

:func:`wrap` is the one wrapping rule: each answer line starts a screen line and its continuations are
indented by two spaces (:class:`gpucomm.report.terminal.Answer` prints through it, so what :func:`fit`
counts is what the terminal shows).  Plain text only: no rich, no matplotlib.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterable, Sequence

__all__ = ["INDENT", "MAX_LINES", "MIN_WIDTH", "fit", "screen_lines", "wrap"]

MAX_LINES = 5
"""Screen lines a command's answer may take (issue 19: "in at most five lines")."""

INDENT = 2
"""Columns a wrapped answer line's continuations are indented by."""

MIN_WIDTH = 20
"""Narrower widths are laid out as this one (the console's own floor, :data:`gpucomm._console.MIN_WIDTH`)."""


def wrap(line: str, width: int) -> list[str]:
    """``line``'s screen lines at ``width`` columns: words kept whole where they fit, continuations indented."""
    return textwrap.wrap(line, width=max(width, MIN_WIDTH), subsequent_indent=" " * INDENT,
                         break_on_hyphens=False, break_long_words=True) or [""]


def screen_lines(lines: Iterable[str], width: int) -> int:
    """How many screen lines ``lines`` take at ``width`` columns (:func:`wrap`)."""
    return sum(len(wrap(line, width)) for line in lines)


def fit(candidates: Iterable[Sequence[str]], width: int, max_lines: int = MAX_LINES) -> list[str]:
    """The first candidate (most detailed first) that takes at most ``max_lines`` screen lines at ``width``;
    the last candidate when none does (the caller makes its last one short enough)."""
    last: Sequence[str] = []
    for lines in candidates:
        if screen_lines(lines, width) <= max_lines:
            return list(lines)
        last = lines
    return list(last)
