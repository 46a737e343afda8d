"""Terminal tables: ``rich`` tables of bench, train, advice and scale records.

:func:`bench_table` follows nccl-tests' output (``../shared/reference/collective-bench.md`` §1.5): the
size, count, type and redop columns, then time, algbw, busbw and ``#wrong``, with a units row under the
header.  A row whose ``#wrong`` is non-zero is drawn bold red and says ``WRONG``, so it cannot be missed.

``gpucomm bench`` redraws :func:`bench_table` inside a ``rich.live.Live`` display as rows arrive, so
building a table is one pass over the records with no sorting or lookups: a few hundred rows cost
about a millisecond.  Callers that keep one table and grow it can use :func:`add_bench_row`.
"""

from __future__ import annotations

from collections.abc import Iterable

from rich import box
from rich.table import Table

from gpucomm.records import AdviceRecord, BenchRecord, ScaleRecord, TrainRecord
from gpucomm.report._format import (
    MISSING,
    fmt_float,
    fmt_int,
    fmt_mem,
    fmt_pct,
    fmt_speedup,
    fmt_wrong,
)

__all__ = [
    "BENCH_COLUMNS",
    "add_bench_row",
    "advice_order",
    "advice_table",
    "bench_row",
    "bench_table",
    "scale_table",
    "train_table",
]

# (header, unit) per column, in nccl-tests order; the unit row sits under the header.
BENCH_COLUMNS: tuple[tuple[str, str], ...] = (
    ("op", ""), ("backend", ""), ("size", "(B)"), ("count", "(elems)"), ("type", ""), ("redop", ""),
    ("n", ""), ("placement", ""), ("time med", "(us)"), ("time p99", "(us)"), ("algbw", "(GB/s)"),
    ("busbw", "(GB/s)"), ("#wrong", ""), ("speedup", "(x base)"),
)
_NUMERIC = {"size", "count", "n", "time med", "time p99", "algbw", "busbw", "#wrong", "speedup"}

_TRAIN_COLUMNS = (
    ("strategy", ""), ("model", ""), ("devices", ""), ("precision", ""), ("status", ""),
    ("samples/s", ""), ("tokens/s", ""), ("step median", "(ms)"), ("step p90", "(ms)"),
    ("peak mem", "(max/device)"), ("comm", "(ms/step)"), ("scaling eff", ""), ("equal to single", ""),
)
_ADVICE_COLUMNS = (
    ("rank", ""), ("strategy", ""), ("hardware", ""), ("GPUs", "(nodes x per node)"), ("step", "(s)"),
    ("samples/s", ""), ("tokens/s", ""), ("scaling eff", ""), ("memory/GPU", "(of capacity)"),
    ("comm share", ""), ("reason", ""),
)
_SCALE_COLUMNS = (
    ("strategy", ""), ("hardware", ""), ("GPUs", ""), ("nodes", ""), ("samples/s", ""),
    ("scaling eff", ""), ("step", "(s)"), ("fits", ""),
)


def _table(columns: Iterable[tuple[str, str]], title: str | None, numeric: set[str] | None = None) -> Table:
    """A table with the given columns and, when any column has a unit, a dim units row under the header."""
    columns = tuple(columns)
    table = Table(title=title, header_style="bold", box=box.SIMPLE_HEAD, pad_edge=False)
    for name, _unit in columns:
        numeric_col = name in (numeric or set())
        table.add_column(name, justify="right" if numeric_col else "left", no_wrap=numeric_col)
    if any(unit for _name, unit in columns):
        table.add_row(*(unit for _name, unit in columns), style="dim", end_section=True)
    return table


def bench_row(record: BenchRecord) -> list[str]:
    """The cells of one bench row, in :data:`BENCH_COLUMNS` order."""
    return [
        record.op, record.backend, str(record.size), str(record.count), record.dtype,
        record.reduce_op or MISSING, str(record.n), record.placement,
        fmt_float(record.time_us_median), fmt_float(record.time_us_p99),
        fmt_float(record.algbw_gbps), fmt_float(record.busbw_gbps),
        fmt_wrong(record.wrong), fmt_speedup(record.speedup),
    ]


def add_bench_row(table: Table, record: BenchRecord) -> None:
    """Append one bench record to a table made by :func:`bench_table`; wrong rows are bold red."""
    table.add_row(*bench_row(record), style="bold red" if record.wrong > 0 else None)


def bench_table(records: Iterable[BenchRecord], title: str | None = None) -> Table:
    """A nccl-tests-style table of bench records, in the order given.

    Args:
        records: bench rows; the table shows them as they come (no sorting), so a live display that
            appends rows keeps its order.
        title: shown above the table; the caller says what the run was (e.g. "CPU numbers").

    Returns:
        A ``rich.table.Table`` with a units row under the header.  Rows with ``#wrong > 0`` are bold red
        and their ``#wrong`` cell reads "N WRONG"; ``n/c`` means the row was not checked.
    """
    table = _table(BENCH_COLUMNS, title, _NUMERIC)
    for record in records:
        add_bench_row(table, record)
    return table


def _equality(record: TrainRecord) -> str:
    if record.equal_to_single is None:
        return MISSING
    diff = "" if record.max_loss_rel_diff is None else f" (loss rel diff {record.max_loss_rel_diff:.1e})"
    return ("equal" if record.equal_to_single else "DIFFERENT") + diff


def _peak(record: TrainRecord) -> str:
    return fmt_mem(max(record.peak_mem_bytes)) if record.peak_mem_bytes else MISSING


def train_table(records: Iterable[TrainRecord], title: str | None = None) -> Table:
    """A table of train records: throughput, step time, memory, comm time, scaling and equality.

    Rows whose status is not "ok" are dim (not applicable) or red (failed) and show their note in
    the status cell; a strategy whose results differ from single's is red.
    """
    numeric = {"devices", "samples/s", "tokens/s", "step median", "step p90", "peak mem", "comm",
               "scaling eff"}
    table = _table(_TRAIN_COLUMNS, title, numeric)
    for r in records:
        status = r.status if not r.note or r.status == "ok" else f"{r.status}: {r.note}"
        style = None
        if r.status == "failed" or r.equal_to_single is False:
            style = "bold red"
        elif r.status != "ok":
            style = "dim"
        table.add_row(
            r.strategy, r.model, str(r.n_devices), r.precision, status,
            fmt_float(r.samples_per_s, 1), fmt_float(r.tokens_per_s, 0),
            fmt_float(r.step_ms_median), fmt_float(r.step_ms_p90), _peak(r),
            fmt_float(r.comm_ms_median), fmt_pct(r.scaling_efficiency), _equality(r),
            style=style,
        )
    return table


def advice_order(records: Iterable[AdviceRecord]) -> list[AdviceRecord]:
    """Ranked rows first (rank 1 = recommended), then rows that do not fit, in their given order."""
    records = list(records)
    ranked = sorted((r for r in records if r.rank is not None), key=lambda r: r.rank)
    return ranked + [r for r in records if r.rank is None]


def _advice_memory(r: AdviceRecord) -> str:
    text = f"{fmt_mem(r.memory_per_gpu_bytes)} / {fmt_mem(r.memory_capacity_bytes)}"
    return text if r.fits else f"OOM {text}"


def advice_table(records: Iterable[AdviceRecord], title: str | None = None) -> Table:
    """The advisor's ranked table: recommended first; strategies that do not fit say OOM, in red."""
    numeric = {"rank", "step", "samples/s", "tokens/s", "scaling eff", "comm share"}
    table = _table(_ADVICE_COLUMNS, title, numeric)
    for r in advice_order(records):
        table.add_row(
            fmt_int(r.rank) if r.fits else "OOM", r.strategy, r.hardware,
            f"{r.nodes * r.gpus_per_node} ({r.nodes}x{r.gpus_per_node})", fmt_float(r.step_time_s, 4),
            fmt_float(r.samples_per_s, 1), fmt_float(r.tokens_per_s, 0), fmt_pct(r.scaling_efficiency),
            _advice_memory(r), fmt_pct(r.comm_share), r.reason,
            style=None if r.fits else "red",
        )
    return table


def scale_table(records: Iterable[ScaleRecord], title: str | None = None) -> Table:
    """``advise --scale`` points: predicted throughput and efficiency per strategy and GPU count."""
    table = _table(_SCALE_COLUMNS, title, {"GPUs", "nodes", "samples/s", "scaling eff", "step"})
    for r in sorted(records, key=lambda r: (r.strategy, r.hardware, r.gpus)):
        table.add_row(r.strategy, r.hardware, str(r.gpus), str(r.nodes), fmt_float(r.samples_per_s, 1),
                      fmt_pct(r.scaling_efficiency), fmt_float(r.step_time_s, 4), "yes" if r.fits else "OOM",
                      style=None if r.fits else "red")
    return table
