"""A benchmark's report, shown and kept: the one ending every report-writing benchmark shares."""

from __future__ import annotations

from pathlib import Path

__all__ = ["emit"]


def emit(text: str, out: str | None) -> int:
    """Print ``text`` and, where ``out`` names a file, write the same text there; the exit status, 0."""
    print(text, end="")
    if out:
        Path(out).write_text(text)
    return 0
