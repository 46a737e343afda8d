"""The live terminal view of a run: a progress bar and, per collective, a table that grows row by row.

Tables come from :func:`gpucomm.report.terminal.bench_table` (the report's own renderer, rebuilt for
each new row so that it lays itself out for the terminal), so the live view and the report agree.  When one collective's rows are done its table is
printed for good and the next one starts; without a terminal (a pipe, CI, ``TERM=dumb``) only those
finished tables are printed.

Why the view refreshes by hand: with rich's auto-refresh a second thread redraws the live region while
the main thread prints a finished table.  Each thread computes "move the cursor up N lines" from the
region's height at the moment it rendered, but the bytes reach the terminal later, in either order, so
a redraw computed for the old (tall) region could erase lines of a table printed a moment before, and
a redraw for the new (short) one could leave a stale copy behind.  Here every write — redraws and
finished tables alike — happens on the caller's thread, through the ``Live`` object's console
(``Live.console.print`` moves the cursor past the live region first), so the order of the bytes is the
order of the calls.  The cost: the elapsed-time column moves only when a row arrives or
:meth:`LiveView.describe` is called.
"""

from __future__ import annotations

from rich.console import Console, Group
from rich.live import Live
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from gpucomm import _console
from gpucomm.records import BenchRecord
from gpucomm.report.terminal import bench_table

__all__ = ["LiveView", "make_console"]


def make_console(stderr: bool = False) -> Console:
    """A console for the bench output at the width every gpucomm command uses.

    :func:`gpucomm._console.console_width`: ``COLUMNS`` when set, else the terminal's width, else 120
    columns (a pipe has no width of its own; 120 keeps a log file readable without the 80-column
    caption and notes layout of :mod:`gpucomm.report.terminal`).
    """
    return _console.make_console(stderr=stderr)


class LiveView:
    """Progress over ``total`` planned rows plus the current collective's table.

    Use as a context manager.  Every call redraws the live region from the calling thread; nothing
    redraws in the background (see the module docstring for why).
    """

    def __init__(self, console: Console, title: str, total: int) -> None:
        self.console, self.title = console, title
        self.progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), console=console, auto_refresh=False)
        self.task = self.progress.add_task("starting", total=max(total, 1))
        self._op: str | None = None
        self._records: list[BenchRecord] = []
        self._table = None
        self._table_title = title
        self._live = Live(Group(self.progress), console=console, auto_refresh=False, transient=True,
                          redirect_stdout=False, redirect_stderr=False)

    def __enter__(self) -> LiveView:
        self._live.start(refresh=True)
        return self

    def __exit__(self, *exc: object) -> None:
        self._flush()
        self._live.stop()

    def describe(self, text: str) -> None:
        """Say what is being measured now (beside the bar)."""
        self.progress.update(self.task, description=text)
        self._redraw()

    def add(self, record: BenchRecord) -> None:
        """Show one finished row."""
        if record.op != self._op:
            self._flush()
            self._op = record.op
            self._table_title = f"{self.title} — {record.op}"
        self._records.append(record)
        self._table = bench_table(self._records, title=self._table_title)
        self.progress.advance(self.task)
        self._redraw()

    def _redraw(self) -> None:
        parts = (self._table, self.progress) if self._table is not None else (self.progress,)
        self._live.update(Group(*parts), refresh=True)

    def _flush(self) -> None:
        """Print the current table for good: it leaves the live region and scrolls up as normal output."""
        if self._table is None:
            return
        table = self._table
        self._table, self._records = None, []
        self._live.update(Group(self.progress), refresh=False)
        self._live.console.print(table)
        self._redraw()
