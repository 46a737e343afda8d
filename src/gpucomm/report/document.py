"""The report as data: sections of blocks that the Markdown and HTML renderers both draw.

:func:`gpucomm.report.content.document` turns records into a :class:`Document`; :mod:`~gpucomm.report.markdown`
and :mod:`~gpucomm.report.html` only lay it out.  Building the content once is what makes the two files
say the same thing: a number, a flagged row or a warning cannot appear in one and be missing from the
other.

Every string in a block is plain text taken from records (which may hold anything a user typed on a
command line); each renderer escapes it for its own format.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

__all__ = ["Answer", "Block", "Document", "Figure", "KeyValues", "Paragraph", "Preformatted", "Section", "Table"]

Flag = Literal["", "wrong", "oom", "failed", "na"]
"""How a table row is marked: a wrong result, a strategy that does not fit, a failed or n/a run."""


@dataclass(slots=True)
class Paragraph:
    """A line of text; ``tone`` "warning" makes it a banner (CPU numbers, wrong results)."""

    text: str
    tone: Literal["", "note", "warning", "ok"] = ""
    kind: str = field(default="paragraph", init=False)


@dataclass(slots=True)
class Answer:
    """A run's answer (:func:`gpucomm.report.findings.answer`): an optional head line, then the findings.

    ``head`` says how far the lines below can be trusted (bench: rows checked, noisy, CPU numbers); a line
    of the form "subject: text" shows its subject in bold; ``title`` names the run when a report compares
    several ("" otherwise).
    """

    title: str
    lines: list[str]
    head: str = ""
    kind: str = field(default="answer", init=False)


@dataclass(slots=True)
class KeyValues:
    """A two-column list of names and values (versions, settings)."""

    pairs: list[tuple[str, str]]
    mono: bool = True
    """Values in a fixed-width font (settings, versions); False for prose (the units legend)."""
    kind: str = field(default="keyvalues", init=False)


@dataclass(slots=True)
class Preformatted:
    """Text shown verbatim in a fixed-width font (a command line)."""

    text: str
    kind: str = field(default="pre", init=False)


@dataclass(slots=True)
class Table:
    """A table with a units row and optional column groups.

    Attributes:
        headers: column names.
        units: one unit per column ("" for none); drawn as a row under the header.
        rows: cells as text, one list per row, as long as ``headers``.
        flags: per row, how it is marked ("" for unmarked); same length as ``rows``.
        groups: column-group labels with the number of columns each spans, e.g.
            ``[("", 6), ("out-of-place", 6), ("in-place", 6)]``; empty for no group row.
        numeric: per column, whether it is right-aligned.
        caption: what the table shows, above it.
        tones: per row, one tone per cell ("good", "bad", "even", "muted" or ""), or empty for none: how a
            summary cell is coloured (faster, slower, on par, not trusted).

    A cell's text may hold a line break ("1.36x faster\ngather, all sizes"): HTML draws a second line,
    Markdown joins the two with " · ".
    """

    headers: list[str]
    units: list[str]
    rows: list[list[str]]
    flags: list[str]
    numeric: list[bool]
    groups: list[tuple[str, int]] = field(default_factory=list)
    caption: str = ""
    tones: list[list[str]] = field(default_factory=list)
    kind: str = field(default="table", init=False)


@dataclass(slots=True)
class Figure:
    """A plot, rendered as PNG and SVG bytes; ``name`` is its file stem under ``plots/``."""

    name: str
    title: str
    png: bytes
    svg: bytes
    kind: str = field(default="figure", init=False)


Block = Paragraph | Answer | KeyValues | Preformatted | Table | Figure


@dataclass(slots=True)
class Section:
    """A heading (``level`` 2 or 3) and its blocks."""

    title: str
    level: int = 2
    blocks: list[Block] = field(default_factory=list)
    anchor: str = ""


@dataclass(slots=True)
class Document:
    """The whole report: a title, banners shown at the top, and sections in order."""

    title: str
    subtitle: str
    banners: list[Paragraph]
    sections: list[Section]

    def figures(self) -> list[Figure]:
        """Every figure in the document, in order."""
        return [b for s in self.sections for b in s.blocks if isinstance(b, Figure)]
