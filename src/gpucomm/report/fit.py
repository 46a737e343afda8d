"""A table that lays itself out for the terminal it is printed in.

Rich squeezes a table that is too wide by wrapping and then truncating cells ("torch.…", "d…"), which
makes rows impossible to tell apart.  :class:`FitTable` instead decides, at render time and for the
width it is given, what to show:

1. **Constant columns move to the caption.**  A column marked ``collapse`` whose cells are the same in
   every row ("type float32", "redop sum", "hardware h200-nvswitch") is said once under the table.
2. **Prose becomes numbered notes.**  A ``prose`` column (a reason, a note) shows ``[1]``, ``[2]`` …
   and the text is listed under the table, once per distinct text, where it can take the full width.
3. **Optional numbers go last.**  An optional column (one with a ``drop`` rank) that is empty in every
   row is left out; while the table is still wider than the terminal, the optional column with the
   highest ``drop`` rank is left out, and the caption says which were left out and where to read them.
4. **Names never truncate.**  Name columns fold onto a second line only when nothing else is left to
   move; numbers never wrap.

Because the decision is made in ``__rich_console__``, one object prints correctly in an 80-column
terminal, a 200-column log and a test's ``Console(width=80)``; callers do not pass a width.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rich import box
from rich.console import Console, ConsoleOptions, RenderResult
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from gpucomm.report._format import MISSING

__all__ = ["Column", "FitTable"]

_UNBOUNDED = 100_000


@dataclass(frozen=True, slots=True)
class Column:
    """One column of a :class:`FitTable`.

    Attributes:
        name: the header.
        unit: shown in a dim row under the header ("" for none).
        numeric: right-aligned and never wrapped.
        collapse: moved to the caption when every row has the same value.
        prose: shown as numbered notes under the table instead of in the row.
        drop: 0 = always shown; otherwise left out, highest first, while the table is too wide.
    """

    name: str
    unit: str = ""
    numeric: bool = False
    collapse: bool = False
    prose: bool = False
    drop: int = 0


class FitTable:
    """Rows of plain-text cells that render as a ``rich`` table fitted to the console's width.

    Args:
        columns: the columns, in display order.
        rows: one sequence of cells per row, in column order (plain text: never read as markup).
        styles: one rich style (or None) per row, e.g. "bold red" for a wrong row.
        title: shown above the table.
        notes: extra lines for the caption (say what every row shares that is not a column).
        more: where the left-out columns can be read ("report.md"), named in the caption.
    """

    def __init__(self, columns: Sequence[Column], rows: Sequence[Sequence[str]],
                 styles: Sequence[str | None] | None = None, *, title: str | None = None,
                 notes: Sequence[str] = (), more: str = "the report") -> None:
        self.columns = list(columns)
        self.rows = [list(r) for r in rows]
        self.styles = list(styles) if styles is not None else [None] * len(self.rows)
        self.title, self.notes, self.more = title, list(notes), more

    # ----- what is shown --------------------------------------------------------------------------------
    def constants(self) -> dict[str, str]:
        """Collapsible columns whose value is the same in every row (at least one row)."""
        out = {}
        for i, col in enumerate(self.columns):
            values = {row[i] for row in self.rows}
            if col.collapse and self.rows and len(values) == 1:
                out[col.name] = values.pop()
        return out

    def layout(self, width: int, console: Console | None = None) -> tuple[list[int], list[str]]:
        """(indices of the columns shown, names of the optional columns left out) at ``width``."""
        constant = self.constants()
        empty = {i for i, c in enumerate(self.columns)  # an optional column with nothing in it says nothing
                 if c.drop and self.rows and all(row[i] in (MISSING, "") for row in self.rows)}
        shown = [i for i, c in enumerate(self.columns)
                 if c.name not in constant and not c.prose and i not in empty]
        dropped: list[str] = []
        console = console or Console(width=width)
        options = console.options.update_width(_UNBOUNDED)  # the natural width, not one clamped to ours
        droppable = sorted((i for i in shown if self.columns[i].drop), key=lambda i: -self.columns[i].drop)
        while Measurement.get(console, options, self._table(shown, dropped, caption=False)).maximum > width:
            if not droppable:
                break
            i = droppable.pop(0)
            shown.remove(i)
            dropped.append(self.columns[i].name)
        return shown, dropped

    def table(self, width: int, console: Console | None = None) -> Table:
        """The ``rich`` table that this object renders as at ``width`` columns."""
        shown, dropped = self.layout(width, console)
        console = console or Console(width=width)
        natural = Measurement.get(console, console.options.update_width(_UNBOUNDED),
                                  self._table(shown, dropped, caption=False)).maximum
        # the caption is wrapped to the table's width, so pack it to that width
        return self._table(shown, dropped, caption=True, width=min(width, natural))

    def plain(self, width: int) -> str:
        """The table as plain text at ``width`` columns (for logs and tests)."""
        console = Console(width=width, record=True, color_system=None, file=_Null())
        console.print(self)
        return console.export_text()

    # ----- rich protocol ---------------------------------------------------------------------------------
    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield self.table(options.max_width, console)

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Measurement(1, options.max_width)

    # ----- building ----------------------------------------------------------------------------------------
    def _note_numbers(self) -> tuple[list[dict[int, str]], list[str]]:
        """Per row, {prose column index: "[k]"}; and the numbered note lines, each distinct text once."""
        texts: dict[str, int] = {}
        marks: list[dict[int, str]] = []
        prose = [i for i, c in enumerate(self.columns) if c.prose]
        for row in self.rows:
            mark = {}
            for i in prose:
                text = row[i].strip()
                if text:
                    k = texts.setdefault(text, len(texts) + 1)
                    mark[i] = f"[{k}]"
            marks.append(mark)
        return marks, [f"[{k}] {text}" for text, k in texts.items()]

    def _table(self, shown: list[int], dropped: list[str], caption: bool, width: int = _UNBOUNDED) -> Table:
        marks, note_lines = self._note_numbers()
        has_notes = bool(note_lines)
        table = Table(title=self.title, header_style="bold", box=box.SIMPLE_HEAD, pad_edge=False,
                      padding=(0, 1), collapse_padding=True, show_edge=False)
        for i in shown:
            col = self.columns[i]
            table.add_column(col.name, justify="right" if col.numeric else "left", no_wrap=col.numeric,
                             overflow="fold")
        if has_notes:
            table.add_column("note", justify="left", no_wrap=True)
        units = [self.columns[i].unit for i in shown]
        if any(units):
            table.add_row(*(Text(u) for u in units), *([Text("")] if has_notes else []),
                          style="dim", end_section=True)
        for row, style, mark in zip(self.rows, self.styles, marks, strict=True):
            cells = [Text(row[i]) for i in shown]
            if has_notes:
                cells.append(Text(" ".join(mark.values())))
            table.add_row(*cells, style=style)
        if caption:
            # a column that is empty in every row is simply left out; it has nothing to say
            lines = _pack([f"{k} {v}" for k, v in self.constants().items() if v != MISSING], width)
            lines += self.notes
            lines += note_lines
            if dropped:
                lines.append(f"not shown at this width: {', '.join(dropped)} (widen the terminal or read "
                             f"{self.more})")
            if lines:
                table.caption = Text("\n".join(lines))
                table.caption_justify = "left"
        return table


def _pack(items: list[str], width: int) -> list[str]:
    """Join ``items`` with " · " into lines of at most ``width`` columns, never splitting an item."""
    lines: list[str] = []
    for item in items:
        if lines and len(lines[-1]) + 3 + len(item) <= width:
            lines[-1] += " · " + item
        else:
            lines.append(item)
    return lines


class _Null:
    """A file that discards what is written (the recording console keeps its own copy)."""

    def write(self, text: str) -> int:
        return len(text)

    def flush(self) -> None:
        pass
