"""Plain-text ``--help`` for every ``gpucomm`` command: the command's manual, as a person reads it.

A subcommand's manual is its module docstring (STYLE: a CLI module's docstring is its manual), written
in the light reStructuredText the rest of the source uses.  :func:`install` turns any parser's
description into help a person reads in a terminal:

* **Examples first.**  The help shows the usage line, the one-paragraph summary, the examples (the
  first ``Usage::`` or ``Examples::`` block, titled "Examples:"), the options, and then the rest of
  the manual.
* **No markup.**  ````code```` becomes ``code``, ``:class:`~a.b.C``` becomes ``C``, ``**bold**``
  becomes ``bold``; a paragraph ending in ``::`` ends in ``:`` and introduces a literal block;
  ``.. note::`` becomes "Note:".
* **Wrapped to the terminal.**  Paragraphs and list items are refilled to :func:`help_width` (the
  shared :func:`gpucomm._console.console_width`, so ``COLUMNS`` is honoured for piped output, at most
  :data:`MAX_WIDTH`) with hanging indents.  Literal blocks (commands) keep their lines; where one is
  too wide, every comment of that block moves onto its own line above its command, and a command
  still too wide breaks between words with a ``\\`` continuation, so it can still be pasted.

Torch-free and rich-free: ``gpucomm --help`` answers at once.
"""

from __future__ import annotations

import argparse
import inspect
import re
import textwrap

from gpucomm._console import console_width

__all__ = ["MAX_WIDTH", "HelpFormatter", "help_width", "install", "plain", "render", "split_manual"]

MAX_WIDTH = 100
"""Help never fills more columns than this: prose wider than ~100 columns is hard to read."""

_ROLE = re.compile(r":[a-z]+(?::[a-z]+)?:`([^`]+)`")
_CODE = re.compile(r"``(.+?)``")
_INTERPRETED = re.compile(r"(?<![\w`])`([^`\n]+)`(?![\w`])")
_BOLD = re.compile(r"\*\*(.+?)\*\*")
_BULLET = re.compile(r"^(\s*)([*-]|\d+\.)\s+(.*)$")
_DIRECTIVE = re.compile(r"^\.\.\s+(\w+)::\s*")
_EXAMPLES = re.compile(r"^(Usage|Examples?)\b([^\n]*)::$")


def _role(match: re.Match[str]) -> str:
    text = match.group(1)
    if text.endswith(">") and "<" in text:  # :ref:`words <target>`
        return text[:text.index("<")].strip()
    if text.startswith("~"):  # :class:`~a.b.C` shows C
        return text[1:].rsplit(".", 1)[-1]
    return text


def plain(text: str) -> str:
    """``text`` with its inline reST markup removed (roles, ````code````, ```interpreted```, ``**bold**``)."""
    text = _ROLE.sub(_role, text)
    text = _CODE.sub(r"\1", text)
    text = _INTERPRETED.sub(r"\1", text)
    return _BOLD.sub(r"\1", text)


def help_width() -> int:
    """Columns help text may fill: the console width (``COLUMNS`` first), at most :data:`MAX_WIDTH`."""
    return min(console_width(), MAX_WIDTH)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _groups(text: str) -> list[list[str]]:
    """Runs of non-blank lines (reST's paragraphs, list blocks and literal chunks)."""
    groups: list[list[str]] = [[]]
    for line in text.expandtabs(4).splitlines():
        if line.strip():
            groups[-1].append(line.rstrip())
        elif groups[-1]:
            groups.append([])
    return [g for g in groups if g]


def _items(group: list[str]) -> list[tuple[int, str, str]]:
    """A group's list items or its one paragraph: ``(indent, marker or "", text joined on one line)``."""
    items: list[tuple[int, str, list[str]]] = []
    for line in group:
        bullet = _BULLET.match(line)
        if bullet:
            items.append((len(bullet.group(1)), bullet.group(2), [bullet.group(3)]))
        elif items:
            items[-1][2].append(line.strip())
        else:
            items.append((_indent(line), "", [line.strip()]))
    return [(indent, marker, " ".join(words)) for indent, marker, words in items]


def _fill(text: str, width: int, first: str, rest: str) -> list[str]:
    return textwrap.wrap(text, width=width, initial_indent=first, subsequent_indent=rest,
                         break_on_hyphens=False) or [first.rstrip()]


def _split_words(line: str, width: int) -> list[str]:
    """A command too wide for ``width``: break between words, each line but the last ending in ``\\``."""
    indent = " " * _indent(line)
    words = line.split()
    lines, current = [], indent + words[0]
    for word in words[1:]:
        if len(current) + 1 + len(word) + 2 <= width:
            current += " " + word
        else:
            lines.append(current + " \\")
            current = indent + "    " + word
    return [*lines, current]


def _literal(lines: list[str], width: int) -> list[str]:
    """A literal block (commands) fitted to ``width``: unchanged when every line fits."""
    if all(len(line) <= width for line in lines):
        return lines
    out: list[str] = []
    comment_end = None  # where the last command's moved comment ends: a comment-only line continues it
    for line in lines:
        code, sep, comment = line.partition("  # ")
        if line.lstrip().startswith("# ") and comment_end is not None:
            indent = " " * _indent(out[comment_end])
            moved = _fill(line.strip()[2:], width, indent + "# ", indent + "# ")
            out[comment_end:comment_end] = moved
            comment_end += len(moved)
            continue
        comment_end = None
        if sep and code.strip():
            indent = " " * _indent(line)
            out += _fill(comment.strip(), width, indent + "# ", indent + "# ")
            comment_end = len(out)
            line = code.rstrip()
        out += [line] if len(line) <= width else _split_words(line, width)
    return out


def render(text: str, width: int) -> str:
    """Light reST → plain text in at most ``width`` columns (see the module docstring)."""
    out: list[str] = []
    literal_above: int | None = None  # body indent of the paragraph that introduced a literal block
    for group in _groups(inspect.cleandoc(text)):
        if literal_above is not None and min(map(_indent, group)) > literal_above:
            out += [*_literal(group, width), ""]
            continue
        literal_above = None
        for indent, marker, raw in _items(group):
            body = " ".join(plain(_DIRECTIVE.sub(lambda m: m.group(1).capitalize() + ": ", raw)).split())
            if body.endswith("::"):
                body = body[:-2].rstrip()
                body = body + ":" if body and not body.endswith(":") else body
                literal_above = indent + (len(marker) + 1 if marker else 0)
            if body:
                lead = " " * indent + (marker + " " if marker else "")
                out += _fill(body, width, lead, " " * len(lead))
        out.append("")
    return "\n".join(out).strip("\n")


def split_manual(doc: str) -> tuple[str, str]:
    """``(head, rest)`` of a manual: the summary and the first examples block, then everything else.

    The examples block is a paragraph ``Usage…::`` or ``Examples…::`` and the indented lines after it;
    its title becomes "Examples…" (the usage line above it already says "usage").  Without one, the
    head is the summary alone.
    """
    groups = re.split(r"\n[ \t]*\n", inspect.cleandoc(doc).strip())
    head, rest = groups[:1], groups[1:]
    for i, group in enumerate(rest):
        title = _EXAMPLES.match(group)
        if title is None:
            continue
        end = i + 1
        while end < len(rest) and rest[end][:1] in (" ", "\t"):
            end += 1
        head += [f"Examples{title.group(2)}::", *rest[i + 1:end]]
        rest = rest[:i] + rest[end:]
        break
    return "\n\n".join(head), "\n\n".join(rest)


class HelpFormatter(argparse.HelpFormatter):
    """argparse's formatter at :func:`help_width`, with descriptions rendered by :func:`render`.

    Option help strings lose their inline markup too (:func:`plain`); argparse wraps them as usual.
    """

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24,
                 width: int | None = None) -> None:
        super().__init__(prog, indent_increment, max_help_position,
                         help_width() - 2 if width is None else width)

    def _format_text(self, text: str) -> str:
        if "%(prog)" in text:
            text = text % {"prog": self._prog}
        return render(text, max(self._width - self._current_indent, 11)) + "\n\n"

    def _expand_help(self, action: argparse.Action) -> str:
        return plain(super()._expand_help(action))

    def _split_lines(self, text: str, width: int) -> list[str]:
        # argparse breaks on hyphens too ("gpucomm-" / "results/"); a flag or path must stay whole
        return textwrap.wrap(" ".join(text.split()), width, break_on_hyphens=False) or [""]


def install(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Give ``parser`` plain help: :class:`HelpFormatter`, and its manual split by :func:`split_manual`.

    The manual is the parser's description and epilog together (a module that already split its
    docstring gets the same layout as one that passed it whole).  Idempotent.
    """
    doc = "\n\n".join(part for part in (parser.description, parser.epilog) if part)
    if doc.strip():
        head, rest = split_manual(doc)
        parser.description, parser.epilog = head, rest or None
    parser.formatter_class = HelpFormatter
    return parser
