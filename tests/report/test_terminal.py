from __future__ import annotations

import pytest
from report_records import advice_rows, bench, bench_sweep, scale_rows, train_rows

from gpucomm.report.terminal import (
    BENCH_COLUMNS,
    Answer,
    advice_table,
    bench_row,
    bench_table,
    scale_table,
    train_table,
)

WIDTHS = (80, 120)


def _fits(text: str, width: int) -> None:
    assert max(len(line.rstrip()) for line in text.splitlines()) <= width
    assert "…" not in text  # nothing truncated


def _body(text: str) -> list[str]:
    return text.splitlines()


def test_bench_row_cells_match_the_record():
    r = bench(size=1 << 20, time_us=8.0, speedup=1.5, baseline="torch.cuda.comm")
    cells = dict(zip([c.name for c in BENCH_COLUMNS], bench_row(r), strict=True))
    assert cells["size"] == "1 MiB"
    assert cells["count"] == str((1 << 20) // 4)
    assert cells["time med"] == "8.00"
    assert cells["algbw"] == f"{(1 << 20) / 8e-6 / 1e9:.2f}"
    assert cells["speedup"] == "1.50x"
    assert cells["redop"] == "sum"
    assert cells["form"] == "plain"
    assert cells["trust"] == ""
    r.time_us_p99 = 4 * r.time_us_median
    assert dict(zip([c.name for c in BENCH_COLUMNS], bench_row(r), strict=True))["trust"] == "noisy"


@pytest.mark.parametrize("width", WIDTHS)
def test_bench_table_fits_and_every_row_is_identifiable(width):
    rows = bench_sweep()
    text = bench_table(rows, title="CPU numbers").plain(width)
    _fits(text, width)
    assert "CPU numbers" in text
    for name in ("torch.cuda.comm", "gpucomm.comm", "all_reduce", "all_gather", "in-place", "out-of-place"):
        assert name in text
    # what every row shares is said once, in the caption
    assert "type float32" in text and "n 2" in text
    assert "(us)" in text  # the units row


def test_bench_table_narrow_terminal_says_what_it_left_out():
    text = bench_table(bench_sweep(), title="t").plain(80)
    assert "not shown at this width" in text and "count" in text
    assert "not shown" not in bench_table(bench_sweep(), title="t").plain(200)


def test_bench_table_per_op_rows_move_the_op_to_the_caption():
    rows = [r for r in bench_sweep() if r.op == "all_reduce" and r.placement == "in-place"]
    text = bench_table(rows).plain(80)
    header = next(line for line in _body(text) if "backend" in line)
    assert "op" not in header.split() and "placement" not in header.split()
    assert "op all_reduce" in text and "placement in-place" in text


def test_wrong_rows_are_marked_and_styled():
    rows = [bench(wrong=0), bench(wrong=7), bench(wrong=-1)]
    table = bench_table(rows).table(200)
    wrong = [c.header for c in table.columns].index("#wrong")
    assert [str(c) for c in table.columns[wrong]._cells[1:]] == ["0", "7 WRONG", "n/c"]
    assert table.rows[2].style == "bold red"  # row 0 is the units row
    assert table.rows[1].style is None


def test_bench_form_column_says_which_row_is_which():
    plain, prepared = bench(), bench()
    prepared.form = "prepared"
    text = bench_table([plain, prepared]).plain(80)
    assert "prepared" in text and "plain" in text


@pytest.mark.parametrize("width", WIDTHS)
def test_train_table_fits_and_shows_host_cost_next_to_gpu_time(width):
    rows = train_rows()
    for r in rows:
        if r.status == "ok":
            r.gpu_ms_median, r.host_ms_per_device = 10.0, 0.25
    text = train_table(rows).plain(width)
    _fits(text, width)
    header = next(line for line in _body(text) if "strategy" in line).split()
    assert "GPU" in header and "host/dev" in header
    for name in ("single", "dp", "replicated", "ddp"):
        assert name in text
    assert "DIFFERENT" in text and "n/a" in text
    assert "[1] dp needs CUDA" in text
    assert next(line for line in _body(text) if line.startswith("dp") and "n/a" in line).rstrip().endswith("[1]")
    assert "model gpt-tiny" in text  # the same in every row: caption, not a column


def test_train_table_leaves_out_empty_columns():
    rows = train_rows()
    for r in rows:
        r.peak_mem_bytes = []  # CPU: no peak memory
    text = train_table(rows).plain(200)
    assert "peak mem" not in text and "GPU" not in text.split()


@pytest.mark.parametrize("width", WIDTHS)
def test_advice_table_fits_ranks_and_flags_oom(width):
    text = advice_table(advice_rows()).plain(width)
    _fits(text, width)
    lines = _body(text)
    order = [next(i for i, line in enumerate(lines) if f" {s} " in f" {line} ") for s in ("zero1", "ddp", "zero3")]
    assert order == sorted(order)
    assert "OOM 200.0" in text
    assert "memory capacity per GPU 141.00 GiB" in text


def test_advice_reasons_become_numbered_notes_under_the_table():
    rows = advice_rows()
    next(r for r in rows if r.strategy == "zero1").reason = "long reason " * 20  # ranked first
    text = advice_table(rows).plain(80)
    _fits(text, 80)
    assert "[1] long reason" in text
    row = next(line for line in _body(text) if " zero1 " in line)
    assert row.rstrip().endswith("[1]")


def test_advice_layout_column_when_records_have_one():
    rows = advice_rows()
    for r in rows:
        r.layout = {"tp": 2, "pp": 1, "cp": 1, "dp": 4, "shard": "zero1", "mb": 2, "ac": "full", "vpp": 1}
    text = advice_table(rows).plain(120)
    assert "tp2 dp4 shard=zero1 mb2 ac=full" in text  # degrees of 1 left out


@pytest.mark.parametrize("width", WIDTHS)
def test_scale_table_sorted_by_gpus(width):
    text = scale_table(scale_rows()).plain(width)
    _fits(text, width)
    first = [line.split()[1] for line in _body(text) if line.split() and line.split()[0] == "ddp"]
    assert [int(g) for g in first] == sorted(int(g) for g in first)


def test_record_text_is_not_read_as_markup():
    rows = advice_rows()
    rows[0].reason = "see [/oops] and [bold]this[/bold]"
    text = advice_table(rows).plain(200)  # rich would raise MarkupError on "[/oops]" if it parsed it
    assert "see [/oops] and [bold]this[/bold]" in text


# ----- noisy rows are marked; the answer columns go last ---------------------------------------------------
def _noisy_sweep():
    rows = [r for r in bench_sweep() if r.op == "all_reduce"]
    rows[0].time_us_p99 = rows[0].time_us_median * 5  # a baseline row: its own and its pair's ratio are noisy
    return rows


@pytest.mark.parametrize("width", WIDTHS)
def test_noisy_rows_say_so_and_speedup_and_trust_are_the_last_columns_to_go(width):
    rows = _noisy_sweep()
    text = bench_table(rows, title="t").plain(width)
    _fits(text, width)
    header = next(line for line in text.splitlines() if line.lstrip().startswith("backend"))
    assert header.split()[-2:] == ["speedup", "trust"]  # shown at 80 columns too
    marked = [line for line in text.splitlines() if line.rstrip().endswith(" noisy")]
    assert len(marked) == 2 and "1 KiB" in marked[0] and "1 KiB" in marked[1]
    assert "noisy = p99 > 3x median (this row or its baseline): speedup not trusted" in " ".join(text.split())
    if width == 80:
        left_out = text.split("not shown at this width: ", 1)[1].split(" (")[0].split(", ")
        assert "speedup" not in left_out and "trust" not in left_out and "count" in left_out


def test_a_table_without_noisy_rows_has_no_trust_column():
    text = bench_table(bench_sweep()).plain(200)
    assert "trust" not in text and "noisy" not in text


def test_answer_wraps_each_line_with_a_hanging_indent_and_keeps_every_word():
    lines = ["answer: 33 rows, all checked correct; CPU numbers, not GPU performance",
             "gpucomm.comm vs torch.cuda.comm: faster at gather 35.00x from 1 MiB up (0.80x below), scatter 3.10x; "
             "slower at broadcast 0.95x; too noisy at reduce (3 of 12 rows left out as noisy)"]
    answer = Answer(lines)
    for width in WIDTHS:
        physical = answer.wrapped(width)
        assert [" ".join(x.strip() for x in p) for p in physical] == lines
        assert all(len(x) <= width for p in physical for x in p)
        assert all(x.startswith("  ") for p in physical for x in p[1:])
    from io import StringIO

    from rich.console import Console

    out = StringIO()
    Console(width=80, file=out, force_terminal=True, color_system="standard").print(answer)
    first = answer.wrapped(80)[0]
    assert out.getvalue().startswith("\x1b[1m" + first[0])  # the first line is bold
