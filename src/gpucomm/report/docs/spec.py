"""What a docs block kind is (:class:`Kind`) and the error every part of :mod:`gpucomm.report.docs` raises.

A kind is one file under ``gpucomm/report/docs/kinds/`` that defines ``KIND``: its name (the word in
a marker), what results file it reads, the options a marker may give it, and the function that turns
that file into Markdown.  The file's name is the kind's name with ``_`` for ``-`` (``bench_pairs.py``
is ``bench-pairs``), so the code of a marker's kind is found by its name.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

__all__ = ["DocError", "Kind", "Render"]

Render = Callable[[Path, dict[str, str]], str]
"""(results file or directory, the marker's options) -> the block's Markdown."""


class DocError(ValueError):
    """A marker that names an unknown kind, a missing file or an unknown option; a block that is not closed;
    a results file a kind cannot read."""


@dataclass(frozen=True, slots=True)
class Kind:
    """One generated-block kind.

    Attributes:
        name: the word after ``generated:`` in a marker (lowercase letters, digits and ``-``).
        reads: one line: which results file it reads and what the block shows (``--kinds`` prints it).
        render: reads the results file (and nothing else) and returns Markdown.
        options: the ``key=value`` option keys a marker may give; any other key is a :class:`DocError`.
    """

    name: str
    reads: str
    render: Render
    options: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.name or not all(c.islower() or c.isdigit() or c == "-" for c in self.name):
            raise ValueError(f"Kind.name: expected lowercase letters, digits and '-', but got {self.name!r}")
        if not self.reads:
            raise ValueError(f"Kind {self.name!r}: say what it reads (reads='...')")
