"""Terminal tables of bench, train, advice and scale records, laid out for the terminal they are in.

Each function returns a :class:`~gpucomm.report.fit.FitTable`: printed through any ``rich`` console it
fits that console's width (80 columns included) without truncating a name — columns that every row
shares move to the caption, reasons and notes become numbered notes under the table, and optional
numbers are left out last (the caption says which).  See :mod:`gpucomm.report.fit`.

:func:`bench_table` follows nccl-tests' output (size, count, type, redop, time, algbw, busbw,
``#wrong``) with a units row under the header.  A row whose ``#wrong`` is non-zero is drawn bold red
and says ``WRONG``, so it cannot be missed.  Building a table is one pass over the records, so the live
bench view rebuilds it for every new row (a few hundred rows cost about a millisecond).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from rich.console import Console, ConsoleOptions, RenderResult
from rich.text import Text

from gpucomm.records import AdviceRecord, BenchRecord, ScaleRecord, TrainRecord
from gpucomm.report._format import (
    MISSING,
    fmt_bytes,
    fmt_float,
    fmt_int,
    fmt_mem,
    fmt_pct,
    fmt_speedup,
    fmt_wrong,
)
from gpucomm.report.findings import glance
from gpucomm.report.findings.bench import NOISY, is_noisy, noisy_rows
from gpucomm.report.fit import Column, FitTable

__all__ = [
    "BENCH_COLUMNS",
    "NOISY_MARK",
    "Answer",
    "advice_order",
    "advice_table",
    "bench_row",
    "bench_table",
    "scale_table",
    "train_table",
]

# nccl-tests order.  Identity columns (op … timing) collapse into the caption when every row shares
# them (so does #wrong when every row is 0); the numbers with a drop rank are left out, highest rank first,
# when the terminal is too narrow — the answer columns (speedup, trust) last.
BENCH_COLUMNS: tuple[Column, ...] = (
    Column("op", collapse=True), Column("backend", collapse=True), Column("form", collapse=True),
    Column("size", numeric=True), Column("count", "(elems)", numeric=True, drop=7),
    Column("type", collapse=True), Column("redop", collapse=True), Column("n", numeric=True, collapse=True),
    Column("placement", collapse=True), Column("timing", collapse=True),
    Column("time med", "(us)", numeric=True, drop=3), Column("time p99", "(us)", numeric=True, drop=5),
    Column("algbw", "(GB/s)", numeric=True, drop=6), Column("busbw", "(GB/s)", numeric=True, drop=4),
    Column("#wrong", numeric=True, collapse=True), Column("speedup", "(x base)", numeric=True, drop=2),
    Column("trust", drop=1), Column("note", prose=True),
)

NOISY_MARK = "noisy"
"""The trust cell of a row whose ratio is not trusted (its p99, or its baseline row's, > 3x its median)."""


_TRAIN_COLUMNS: tuple[Column, ...] = (
    Column("strategy"), Column("model", collapse=True), Column("precision", collapse=True),
    Column("dev", numeric=True, collapse=True), Column("graphs", collapse=True),
    Column("samples/s", numeric=True), Column("tokens/s", numeric=True, drop=4),
    Column("step med", "(ms)", numeric=True), Column("p90", "(ms)", numeric=True, drop=6),
    Column("GPU", "(ms)", numeric=True, drop=2), Column("host/dev", "(ms)", numeric=True, drop=1),
    Column("peak mem", "(GiB)", numeric=True, drop=7), Column("comm", "(ms)", numeric=True, drop=5),
    Column("eff", numeric=True, drop=3), Column("equal"),
    Column("note", prose=True),
)

_ADVICE_COLUMNS: tuple[Column, ...] = (
    Column("rank", numeric=True), Column("strategy"), Column("layout", collapse=True),
    Column("hardware", collapse=True), Column("GPUs", numeric=True, collapse=True),
    Column("step", "(s)", numeric=True), Column("samples/s", numeric=True, drop=3),
    Column("tok/s/GPU", numeric=True, drop=2), Column("MFU", numeric=True, drop=4),
    Column("scaling", numeric=True, drop=1), Column("mem/GPU", "(GiB)", numeric=True),
    Column("comm", "(share)", numeric=True, drop=5), Column("reason", prose=True),
)

_SCALE_COLUMNS: tuple[Column, ...] = (
    Column("strategy"), Column("hardware", collapse=True), Column("GPUs", numeric=True),
    Column("nodes", numeric=True, drop=2), Column("samples/s", numeric=True),
    Column("scaling eff", numeric=True), Column("step", "(s)", numeric=True, drop=1), Column("fits"),
)


# ----- bench --------------------------------------------------------------------------------------------
def bench_row(record: BenchRecord, noisy: bool | None = None) -> list[str]:
    """The cells of one bench row, in :data:`BENCH_COLUMNS` order.

    ``noisy``: whether the row's ratio is untrusted (default: its own p99 alone decides; a table of rows
    passes what :func:`~gpucomm.report.findings.noisy_rows` says, which also looks at the baseline row).
    """
    noisy = is_noisy(record) if noisy is None else noisy
    return [
        record.op, record.backend, record.form, fmt_bytes(record.size), str(record.count), record.dtype,
        record.reduce_op or MISSING, str(record.n), record.placement, record.timing,
        fmt_float(record.time_us_median), fmt_float(record.time_us_p99),
        fmt_float(record.algbw_gbps), fmt_float(record.busbw_gbps),
        fmt_wrong(record.wrong), fmt_speedup(record.speedup), NOISY_MARK if noisy else "", record.note,
    ]


def bench_table(records: Iterable[BenchRecord], title: str | None = None, *,
                more: str = "report.md") -> FitTable:
    """A nccl-tests-style table of bench records, in the order given.

    Args:
        records: bench rows; shown as they come (no sorting), so a live display keeps its order.
        title: shown above the table; the caller says what the run was (e.g. "CPU numbers").
        more: where a reader finds the columns a narrow terminal leaves out.

    Returns:
        A :class:`~gpucomm.report.fit.FitTable` with a units row under the header.  Rows with
        ``#wrong > 0`` are bold red and their ``#wrong`` cell reads "N WRONG"; ``n/c`` means the row was
        not checked.  The ``form`` column says whether a row timed the plain call, a prepared
        collective or a CUDA-graph replay; the speedup is always against the baseline backend's row.  A row
        whose p99 (or whose baseline row's p99) is more than 3x its median says "noisy" in the ``trust``
        column and is dim: its speedup is not an answer (the findings leave it out).  At 80 columns the
        speedup and trust columns are the last numbers left out.
    """
    records = list(records)
    untrusted = noisy_rows(records)
    rows = [bench_row(r, i in untrusted) for i, r in enumerate(records)]
    styles = ["bold red" if r.wrong > 0 else "dim" if i in untrusted else None for i, r in enumerate(records)]
    notes = [f"{NOISY_MARK} = p99 > {NOISY:g}x median (this row or its baseline): speedup not trusted"] if untrusted else []
    return FitTable(BENCH_COLUMNS, rows, styles, title=title, notes=notes, more=more)


# ----- train --------------------------------------------------------------------------------------------
def _equality(record: TrainRecord) -> str:
    """"equal"/"DIFFERENT" against single, or the status when the strategy did not run ("n/a", "FAILED")."""
    if record.status != "ok":
        return {"not-applicable": "n/a", "failed": "FAILED"}.get(record.status, record.status)
    if record.equal_to_single is None:
        return MISSING
    return "equal" if record.equal_to_single else "DIFFERENT"


def _peak(record: TrainRecord) -> str:
    return f"{max(record.peak_mem_bytes) / (1 << 30):.2f}" if record.peak_mem_bytes else MISSING


def _train_row(r: TrainRecord) -> list[str]:
    return [r.strategy, r.model, r.precision, str(r.n_devices), "yes" if r.graphs else "no",
            fmt_float(r.samples_per_s, 1), fmt_float(r.tokens_per_s, 0), fmt_float(r.step_ms_median),
            fmt_float(r.step_ms_p90), fmt_float(r.gpu_ms_median), fmt_float(r.host_ms_per_device, 3),
            _peak(r), fmt_float(r.comm_ms_median), fmt_pct(r.scaling_efficiency), _equality(r), r.note]


def _train_style(r: TrainRecord) -> str | None:
    if r.status == "failed" or r.equal_to_single is False:
        return "bold red"
    return "dim" if r.status != "ok" else None


def train_table(records: Iterable[TrainRecord], title: str | None = None, *,
                more: str = "report.md") -> FitTable:
    """Train records: throughput, step time, GPU time and host cost per device, memory, scaling, equality.

    ``GPU`` is one step's device time on one device; ``host/dev`` the host time one process spends
    enqueuing a step, divided by the devices it drives — the two side by side say whether one process
    can keep its devices busy.  Columns with no value in any row (peak memory on CPU, GPU time where
    it was not measured) are left out; rows whose status is not "ok" are dim ("n/a") or red
    ("FAILED"); a strategy whose results differ from single's is red.  Notes are numbered under the
    table, each distinct text once (rows that share a note share its number).
    """
    records = list(records)
    rows = [_train_row(r) for r in records]
    empty = {i for i, _ in enumerate(_TRAIN_COLUMNS) if rows and all(row[i] in (MISSING, "") for row in rows)}
    columns = [c for i, c in enumerate(_TRAIN_COLUMNS) if i not in empty]
    rows = [[cell for i, cell in enumerate(row) if i not in empty] for row in rows]
    return FitTable(columns, rows, [_train_style(r) for r in records], title=title, more=more)


# ----- advice ---------------------------------------------------------------------------------------------
_LAYOUT_KEYS = ("tp", "pp", "vpp", "cp", "dp", "shard", "mb", "ac")


def _layout(r: AdviceRecord) -> str:
    """The parallel layout, e.g. "tp2 dp4 shard=zero1 mb2 ac=full"; empty when the strategy name says it.

    Degrees of 1 (no tensor, pipeline or context parallelism) and "none" are left out; dp and mb are
    always said.
    """
    layout = getattr(r, "layout", None)
    if not isinstance(layout, dict) or not layout:
        return ""
    parts = []
    for key in _LAYOUT_KEYS:
        value = layout.get(key)
        if value in (None, False, "", "none") or (value == 1 and key not in ("dp", "mb")):
            continue
        parts.append(f"{key}{value}" if isinstance(value, int) and not isinstance(value, bool) else f"{key}={value}")
    text = " ".join(parts)
    return "" if text == r.strategy else text


def advice_order(records: Iterable[AdviceRecord]) -> list[AdviceRecord]:
    """Ranked rows first (rank 1 = recommended), then rows that do not fit, in their given order."""
    records = list(records)
    ranked = sorted((r for r in records if r.rank is not None), key=lambda r: r.rank)
    return ranked + [r for r in records if r.rank is None]


def _advice_memory(r: AdviceRecord) -> str:
    used = r.memory_per_gpu_bytes / (1 << 30)
    return f"{used:.1f}" if r.fits else f"OOM {used:.1f}"


def _advice_row(r: AdviceRecord) -> list[str]:
    per_gpu = getattr(r, "tokens_per_s_per_gpu", None)
    if per_gpu is None and r.tokens_per_s is not None and r.nodes * r.gpus_per_node:
        per_gpu = r.tokens_per_s / (r.nodes * r.gpus_per_node)
    return [fmt_int(r.rank) if r.fits else "OOM", r.strategy, _layout(r), r.hardware,
            f"{r.nodes * r.gpus_per_node} ({r.nodes}x{r.gpus_per_node})", fmt_float(r.step_time_s, 4),
            fmt_float(r.samples_per_s, 1), fmt_float(per_gpu, 0), fmt_pct(getattr(r, "mfu", None)),
            fmt_pct(r.scaling_efficiency), _advice_memory(r), fmt_pct(r.comm_share), r.reason]


def advice_table(records: Iterable[AdviceRecord], title: str | None = None, *,
                 more: str = "report.md") -> FitTable:
    """The advisor's ranked table: recommended first; strategies that do not fit say OOM, in red.

    The GPU memory capacity is the same for every row of one hardware profile, so it goes to the
    caption; each row's reason is a numbered note under the table.
    """
    records = advice_order(records)
    rows = [_advice_row(r) for r in records]
    columns = list(_ADVICE_COLUMNS)
    if rows and all(not row[2] for row in rows):  # records without a layout: no empty column
        columns.pop(2)
        rows = [row[:2] + row[3:] for row in rows]
    capacities = sorted({fmt_mem(r.memory_capacity_bytes) for r in records})
    notes = [f"memory capacity per GPU {', '.join(capacities)}"] if capacities else []
    return FitTable(columns, rows, [None if r.fits else "red" for r in records], title=title, notes=notes,
                    more=more)


def scale_table(records: Iterable[ScaleRecord], title: str | None = None, *,
                more: str = "report.md") -> FitTable:
    """``advise --scale`` points: predicted throughput and efficiency per strategy and GPU count."""
    records = sorted(records, key=lambda r: (r.strategy, r.hardware, r.gpus))
    rows = [[r.strategy, r.hardware, str(r.gpus), str(r.nodes), fmt_float(r.samples_per_s, 1),
             fmt_pct(r.scaling_efficiency), fmt_float(r.step_time_s, 4), "yes" if r.fits else "OOM"]
            for r in records]
    return FitTable(_SCALE_COLUMNS, rows, [None if r.fits else "red" for r in records], title=title,
                    more=more)


# ----- answers --------------------------------------------------------------------------------------------
class Answer:
    """A command's closing answer: a few lines of findings, each wrapped to the console with a hanging indent.

    ``lines`` is the answer's lines, or a function of the console's width that returns them (a command's
    ``*_glance`` findings: the most detail that fits in five screen lines at that width).  The first line is
    bold (it says how far the rest can be trusted, or what to pick).  Like
    :class:`~gpucomm.report.fit.FitTable`, it lays itself out when printed, for the console's width, so one
    object prints correctly at 80 columns and at 200; every word is kept (nothing is truncated), wrapped by
    :func:`gpucomm.report.findings.glance.wrap`.
    """

    def __init__(self, lines: Iterable[str] | Callable[[int], list[str]]) -> None:
        self._lines = lines if callable(lines) else list(lines)

    def lines(self, width: int) -> list[str]:
        """The answer's lines at ``width`` columns."""
        return self._lines(width) if callable(self._lines) else self._lines

    def wrapped(self, width: int) -> list[list[str]]:
        """Per answer line, its screen lines at ``width`` columns (continuations indented)."""
        return [glance.wrap(line, width) for line in self.lines(width)]

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        for k, physical in enumerate(self.wrapped(options.max_width)):
            for line in physical:
                yield Text(line, style="bold" if k == 0 else "")
