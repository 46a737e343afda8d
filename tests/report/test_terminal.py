from __future__ import annotations

from report_records import advice_rows, bench, bench_sweep, scale_rows, train_rows
from rich.console import Console

from gpucomm.report.terminal import (
    BENCH_COLUMNS,
    advice_table,
    bench_row,
    bench_table,
    scale_table,
    train_table,
)


def _text_at(table, width: int) -> str:
    console = Console(width=width, record=True, color_system=None)
    console.print(table)
    return console.export_text()


def _cells(table, index: int) -> list[str]:
    """Column ``index``'s cells as plain strings, the units row left out."""
    return [str(c) for c in table.columns[index]._cells[1:]]


def _text(table) -> str:
    return _text_at(table, 400)


def test_bench_table_has_units_row_and_nccl_tests_columns():
    rows = bench_sweep()
    table = bench_table(rows, title="CPU numbers")
    headers = [c.header for c in table.columns]
    assert headers == [name for name, _ in BENCH_COLUMNS]
    assert table.row_count == len(rows) + 1  # the units row
    text = _text(table)
    lines = text.splitlines()
    units_line = next(line for line in lines if "(GB/s)" in line)
    assert "(us)" in units_line and "(B)" in units_line
    assert "CPU numbers" in text


def test_bench_row_cells_match_the_record():
    r = bench(size=1 << 20, time_us=8.0, speedup=1.5, baseline="torch.cuda.comm")
    cells = dict(zip([name for name, _ in BENCH_COLUMNS], bench_row(r), strict=True))
    assert cells["size"] == str(1 << 20)
    assert cells["count"] == str((1 << 20) // 4)
    assert cells["time med"] == "8.00"
    assert cells["algbw"] == f"{(1 << 20) / 8e-6 / 1e9:.2f}"
    assert cells["speedup"] == "1.50x"
    assert cells["redop"] == "sum"


def test_wrong_rows_are_marked_and_styled():
    rows = [bench(wrong=0), bench(wrong=7), bench(wrong=-1)]
    table = bench_table(rows)
    assert _cells(table, [c.header for c in table.columns].index("#wrong")) == ["0", "7 WRONG", "n/c"]
    assert table.rows[2].style == "bold red"
    assert table.rows[1].style is None


def test_train_table_shows_throughput_and_equality():
    table = train_table(train_rows())
    text = _text(table)
    assert "190.0" in text and "95.0%" in text
    assert "DIFFERENT" in text and "n/a" in text
    assert "dp on 4: dp needs CUDA" in text
    headers = [c.header for c in table.columns]
    assert "model" not in headers and "precision" not in headers  # the same in every row


def test_train_table_leaves_out_empty_columns_and_fits_80_columns():
    rows = train_rows()
    for r in rows:
        r.peak_mem_bytes = []  # CPU: no peak memory
    table = train_table(rows)
    assert "peak mem" not in [c.header for c in table.columns]
    assert "…" not in _text_at(table, 80)


def test_advice_table_ranks_and_flags_oom():
    table = advice_table(advice_rows())
    ranks = _cells(table, 0)
    strategies = _cells(table, 1)
    assert ranks == ["1", "2", "OOM"]
    assert strategies == ["zero1", "ddp", "zero3"]
    assert "OOM 200.00 GiB / 141.00 GiB" in _text(table)


def test_scale_table_sorted_by_gpus():
    table = scale_table(scale_rows())
    gpus = _cells(table, 2)[:6]
    assert gpus == ["1", "2", "4", "8", "16", "32"]


def test_record_text_is_not_read_as_markup():
    rows = advice_rows()
    rows[0].reason = "see [/oops] and [bold]this[/bold]"
    text = _text(advice_table(rows))  # rich would raise MarkupError on "[/oops]" if it parsed it
    assert "see [/oops] and [bold]this[/bold]" in text
