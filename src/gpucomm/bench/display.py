"""The live terminal view of a run: a progress bar and, per collective, a table that grows row by row.

Tables come from :func:`gpucomm.report.terminal.bench_table` (the report's own renderer), so the live
view and the report show the same columns.  When one collective's rows are done its table is
printed for good and the next one starts; without a terminal (a pipe, CI) only those finished
tables are printed.
"""

from __future__ import annotations

from rich.console import Console, Group
from rich.live import Live
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from gpucomm.records import BenchRecord

__all__ = ["LiveView", "make_console"]


def make_console(stderr: bool = False) -> Console:
    """A console that keeps the wide bench table readable when output is not a terminal."""
    console = Console(stderr=stderr)
    if not console.is_terminal:
        console = Console(stderr=stderr, width=200)
    return console


def _tables():
    from gpucomm.report.terminal import add_bench_row, bench_table

    return bench_table, add_bench_row


class LiveView:
    """Progress over ``total`` planned rows plus the current collective's table."""

    def __init__(self, console: Console, title: str, total: int) -> None:
        self.console, self.title = console, title
        self._bench_table, self._add_row = _tables()
        self.progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), console=console)
        self.task = self.progress.add_task("starting", total=max(total, 1))
        self._op: str | None = None
        self._table = None
        self._live = Live(Group(), console=console, refresh_per_second=4, transient=True)

    def __enter__(self) -> LiveView:
        self._live.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._live.stop()
        self._flush()

    def describe(self, text: str) -> None:
        """Say what is being measured now (beside the bar)."""
        self.progress.update(self.task, description=text)

    def add(self, record: BenchRecord) -> None:
        """Show one finished row."""
        if record.op != self._op:
            self._flush()
            self._op = record.op
            self._table = self._bench_table([], title=f"{self.title} — {record.op}")
        self._add_row(self._table, record)
        self.progress.advance(self.task)
        self._live.update(Group(self._table, self.progress))

    def _flush(self) -> None:
        if self._table is not None:
            self._live.update(Group(self.progress))
            self.console.print(self._table)
            self._table = None
