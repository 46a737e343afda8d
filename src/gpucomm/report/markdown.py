"""Markdown rendering of a report :class:`~gpucomm.report.document.Document`.

GitHub-flavoured Markdown: pipe tables with the units row as the first, italic body row; column groups
(out-of-place / in-place) folded into the headers, since Markdown tables cannot span columns; figures
as links to the PNG files written next to the report (``plots/<name>.png``, with the SVG linked).

Text from records is escaped: ``|`` would break a table and ``<``/``>`` would be raw HTML to a
Markdown renderer, so a command line holding ``<script>`` shows as text.
"""

from __future__ import annotations

import re

from gpucomm.report.document import Answer, Document, Figure, KeyValues, Paragraph, Preformatted, Table

__all__ = ["escape", "render"]

_ESCAPES = {"&": "&amp;", "<": "&lt;", ">": "&gt;", "|": "\\|", "\\": "\\\\", "*": "\\*", "`": "\\`",
            "[": "\\[", "]": "\\]"}
_SPECIAL = re.compile(r"[&<>|\\*`\[\]]")


def escape(text: str) -> str:
    """Text safe inside a Markdown paragraph or table cell (one line, no HTML, no table breaks)."""
    return _SPECIAL.sub(lambda m: _ESCAPES[m.group()], " ".join(str(text).splitlines()))


_SHORT = {"out-of-place": "out", "in-place": "in"}
_PREFIX = {"speedup vs baseline": "speedup"}


def _fold(label: str, header: str) -> str:
    if not label:
        return header
    if label in _PREFIX:
        return f"{_PREFIX[label]} {header}"
    return f"{header} ({_SHORT.get(label, label)})"


def _headers(table: Table) -> list[str]:
    """Headers with their group folded in: "busbw (in)" for in-place busbw, "speedup min"."""
    headers, col = [], 0
    for label, span in table.groups or [("", len(table.headers))]:
        headers += [_fold(label, h) for h in table.headers[col:col + span]]
        col += span
    return headers


def _groups_note(table: Table) -> str:
    labels = [label for label, _ in table.groups if label in _SHORT]
    return "; ".join(f"({_SHORT[label]}) = {label}" for label in labels)


def _table(table: Table) -> list[str]:
    def line(cells: list[str]) -> str:
        return "| " + " | ".join(cells) + " |"

    caption = "; ".join(c for c in (table.caption, _groups_note(table)) if c)
    out = [f"*{escape(caption)}*", ""] if caption else []
    out.append(line([escape(h) for h in _headers(table)]))
    out.append("|" + "|".join("---:" if num else ":---" for num in table.numeric) + "|")
    if any(table.units):
        out.append(line([f"*{escape(u)}*" if u else "" for u in table.units]))
    for cells, flag in zip(table.rows, table.flags, strict=True):
        text = [escape(c.replace("\n", " · ")) for c in cells]
        if flag in ("wrong", "failed", "oom"):
            text = [f"**{c}**" if c else c for c in text]
        out.append(line(text))
    return out


def _subject(line: str) -> str:
    """An answer line as a list item, its "subject:" in bold."""
    subject, sep, rest = line.partition(": ")
    return f"- **{escape(subject)}**: {escape(rest)}" if sep else f"- {escape(line)}"


def _block(block) -> list[str]:
    if isinstance(block, Paragraph):
        text = escape(block.text)
        if block.tone == "warning":
            return [f"> **WARNING: {text}**"]
        return [f"*{text}*" if block.tone == "note" else text]
    if isinstance(block, Answer):
        out = [f"**{escape(block.title)}**", ""] if block.title else []
        head = [f"- **answer**: {escape(block.head)}"] if block.head else []
        return out + head + [_subject(line) for line in block.lines]
    if isinstance(block, KeyValues):
        return [f"- **{escape(k.strip())}**: {escape(v)}" for k, v in block.pairs]
    if isinstance(block, Preformatted):
        fence = "`" * max(3, 1 + max((len(m) for m in re.findall(r"`+", block.text)), default=0))
        return [fence + "text", block.text, fence]
    if isinstance(block, Table):
        return _table(block)
    if isinstance(block, Figure):
        return [f"![{escape(block.title)}](plots/{block.name}.png)", "",
                f"[{escape(block.title)} (SVG)](plots/{block.name}.svg)"]
    raise TypeError(f"block: expected a report block, but got {type(block).__name__}")


def render(doc: Document) -> str:
    """The whole report as Markdown text."""
    out = [f"# {escape(doc.title)}", "", escape(doc.subtitle), ""]
    for banner in doc.banners:
        out += _block(banner) + [""]
    for section in doc.sections:
        out += [f"{'#' * section.level} {escape(section.title)}", ""]
        for block in section.blocks:
            out += _block(block) + [""]
    return "\n".join(out).rstrip() + "\n"
