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
from rich.text import Text

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

# Narrow on purpose: the train CLI prints this in whatever terminal it has (80 columns in a pipe).
_TRAIN_COLUMNS = (
    ("strategy", ""), ("model", ""), ("precision", ""), ("dev", ""), ("samples/s", ""), ("tokens/s", ""),
    ("step med", "(ms)"), ("p90", "(ms)"), ("peak mem", "(GiB)"), ("comm", "(ms)"), ("eff", ""),
    ("equal", ""), ("status", ""),
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


def _add(table: Table, cells: Iterable[str], style: str | None = None) -> None:
    """Add a row of plain text: record strings are never read as rich markup ("[/x]" stays as typed)."""
    table.add_row(*(Text(c) for c in cells), style=style)


def _table(columns: Iterable[tuple[str, str]], title: str | None, numeric: set[str] | None = None,
           no_wrap: set[str] | None = None, compact: bool = False) -> Table:
    """A table with the given columns and, when any column has a unit, a dim units row under the header.

    Numeric columns and those in ``no_wrap`` never wrap, so a narrow terminal squeezes prose columns
    (notes, reasons) rather than numbers and names.  ``compact`` separates columns by one space
    instead of two.
    """
    columns = tuple(columns)
    spacing = {"padding": (0, 0), "show_edge": False} if compact else {"collapse_padding": True}
    table = Table(title=title, header_style="bold", box=box.SIMPLE_HEAD, pad_edge=False, **spacing)
    for name, _unit in columns:
        numeric_col = name in (numeric or set())
        table.add_column(name, justify="right" if numeric_col else "left",
                         no_wrap=numeric_col or name in (no_wrap or set()))
    if any(unit for _name, unit in columns):
        table.add_row(*(Text(unit) for _name, unit in columns), style="dim", end_section=True)
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
    _add(table, bench_row(record), style="bold red" if record.wrong > 0 else None)


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
    return "equal" if record.equal_to_single else "DIFFERENT"


def _peak(record: TrainRecord) -> str:
    return f"{max(record.peak_mem_bytes) / (1 << 30):.2f}" if record.peak_mem_bytes else MISSING


def train_table(records: Iterable[TrainRecord], title: str | None = None) -> Table:
    """A table of train records: throughput, step time, memory, comm time, scaling and equality.

    Narrow enough for an 80-column terminal in the common case: the model and precision columns
    appear only when the records differ in them (say them in ``title`` otherwise), and the equality
    column says only "equal" or "DIFFERENT" (the train CLI prints the differences); columns with no
    value in any row are left out.  Rows whose status is not "ok" are dim ("n/a") or red ("FAILED");
    a strategy whose results differ from single's is red.  Notes are listed under the table.
    """
    records = list(records)
    rows = [(_train_cells(r), _train_style(r)) for r in records]
    drop = {name for name in ("model", "precision") if len({cells[name] for cells, _ in rows}) <= 1}
    drop |= {name for name in _OPTIONAL_TRAIN if all(cells[name] in (MISSING, "") for cells, _ in rows)}
    columns = [c for c in _TRAIN_COLUMNS if c[0] not in drop]
    numeric = {"dev", "samples/s", "tokens/s", "step med", "p90", "peak mem", "comm", "eff"}
    table = _table(columns, title, numeric, no_wrap={"strategy", "model", "precision", "equal"}, compact=True)
    for cells, style in rows:
        _add(table, (cells[name] for name, _ in columns), style=style)
    notes = [f"{r.strategy} on {r.n_devices}: {r.note}" for r in records if r.note]
    if notes:  # below the table, where a long note cannot squeeze the numbers
        table.caption = Text("\n".join(notes))
        table.caption_justify = "left"
    return table


# Columns left out when no row has a value (peak memory on CPU, comm time where it is not isolated, …).
_OPTIONAL_TRAIN = ("tokens/s", "peak mem", "comm", "eff", "equal", "status")


def _train_cells(r: TrainRecord) -> dict[str, str]:
    status = {"ok": "", "not-applicable": "n/a", "failed": "FAILED"}.get(r.status, r.status)
    return {"strategy": r.strategy, "model": r.model, "precision": r.precision, "dev": str(r.n_devices),
            "samples/s": fmt_float(r.samples_per_s, 1), "tokens/s": fmt_float(r.tokens_per_s, 0),
            "step med": fmt_float(r.step_ms_median), "p90": fmt_float(r.step_ms_p90), "peak mem": _peak(r),
            "comm": fmt_float(r.comm_ms_median), "eff": fmt_pct(r.scaling_efficiency),
            "equal": _equality(r), "status": status}


def _train_style(r: TrainRecord) -> str | None:
    if r.status == "failed" or r.equal_to_single is False:
        return "bold red"
    return "dim" if r.status != "ok" else None


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
        _add(table, (
            fmt_int(r.rank) if r.fits else "OOM", r.strategy, r.hardware,
            f"{r.nodes * r.gpus_per_node} ({r.nodes}x{r.gpus_per_node})", fmt_float(r.step_time_s, 4),
            fmt_float(r.samples_per_s, 1), fmt_float(r.tokens_per_s, 0), fmt_pct(r.scaling_efficiency),
            _advice_memory(r), fmt_pct(r.comm_share), r.reason,
        ), style=None if r.fits else "red")
    return table


def scale_table(records: Iterable[ScaleRecord], title: str | None = None) -> Table:
    """``advise --scale`` points: predicted throughput and efficiency per strategy and GPU count."""
    table = _table(_SCALE_COLUMNS, title, {"GPUs", "nodes", "samples/s", "scaling eff", "step"})
    for r in sorted(records, key=lambda r: (r.strategy, r.hardware, r.gpus)):
        _add(table, (r.strategy, r.hardware, str(r.gpus), str(r.nodes), fmt_float(r.samples_per_s, 1),
                     fmt_pct(r.scaling_efficiency), fmt_float(r.step_time_s, 4), "yes" if r.fits else "OOM"),
             style=None if r.fits else "red")
    return table
