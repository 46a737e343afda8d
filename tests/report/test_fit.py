"""gpucomm.report.fit: a table fitted to the terminal (constants to the caption, prose to notes,
optional columns dropped highest rank first, names never truncated), at 80 and 120 columns."""

import pytest

from gpucomm.report._format import MISSING
from gpucomm.report.fit import Column, FitTable, _pack

LONG = "torch.distributed.all_reduce_coalesced"


def table(rows=None, **kwargs) -> FitTable:
    cols = [Column("backend"), Column("size", "B", numeric=True), Column("type", collapse=True),
            Column("time", "us", numeric=True), Column("busbw", "GB/s", numeric=True, drop=1),
            Column("algbw", "GB/s", numeric=True, drop=2), Column("reason", prose=True)]
    rows = rows if rows is not None else [
        [LONG, "1024", "float32", "12.50", "0.16", "0.08", ""],
        ["gpucomm.dist", "4096", "float32", "13.00", "0.63", "0.32", "slower than the baseline by a lot"],
        ["torch.cuda.comm", "8192", "float32", "14.00", "1.17", "0.59", "slower than the baseline by a lot"],
    ]
    return FitTable(cols, rows, **kwargs)


def test_constant_collapsible_columns_move_to_the_caption():
    t = table()
    assert t.constants() == {"type": "float32"}
    text = t.plain(120)
    assert "type float32" in text
    assert "float32" not in text.splitlines()[1]  # not a header of the table


def test_a_varying_collapsible_column_stays_in_the_table():
    rows = [[LONG, "8", "float32", "1", "1", "1", ""], ["b", "8", "float16", "1", "1", "1", ""]]
    t = table(rows)
    assert t.constants() == {}
    assert 2 in t.layout(120)[0]
    assert FitTable([Column("x", collapse=True)], []).constants() == {}  # no rows: nothing is constant


def test_prose_becomes_numbered_notes_one_per_distinct_text():
    text = table().plain(120)
    assert text.count("[1] slower than the baseline by a lot") == 1
    assert "[2]" not in text
    body = [line for line in text.splitlines() if line.startswith("gpucomm.dist") or line.startswith("torch.cuda")]
    assert len(body) == 2 and all(line.rstrip().endswith("[1]") for line in body)


@pytest.mark.parametrize("width", [80, 120])
def test_names_never_truncate_and_lines_fit_the_width(width):
    text = table().plain(width)
    assert LONG in text and "…" not in text
    assert all(len(line) <= width for line in text.splitlines())


def test_optional_columns_drop_highest_rank_first_and_the_caption_says_so():
    t = table()
    assert t.layout(120) == ([0, 1, 3, 4, 5], [])  # type is a constant, reason is prose
    assert t.layout(66) == ([0, 1, 3, 4], ["algbw"])  # drop=2 goes before drop=1
    assert t.layout(60) == ([0, 1, 3], ["algbw", "busbw"])
    caption = " ".join(t.plain(60).split())
    assert "not shown at this width: algbw, busbw (widen the terminal or read the report)" in caption
    assert "not shown" not in t.plain(120)


def test_an_optional_column_empty_in_every_row_is_left_out_silently():
    rows = [[LONG, "8", "float32", "1", MISSING, "", ""], ["b", "8", "float32", "1", "", MISSING, ""]]
    shown, dropped = table(rows).layout(200)
    assert 4 not in shown and 5 not in shown and dropped == []
    assert "not shown" not in table(rows).plain(200)


def test_units_row_notes_title_and_more_appear():
    lines = table(title="all_reduce", notes=["2 ranks, gloo"]).plain(120).splitlines()
    assert lines[0].strip() == "all_reduce"
    units = next(line for line in lines if "GB/s" in line).split()
    assert units == ["B", "us", "GB/s", "GB/s"]
    assert any(line.strip() == "2 ranks, gloo" for line in lines)
    narrow = " ".join(table(more="report.md").plain(60).split())
    assert "(widen the terminal or read report.md)" in narrow


def test_pack_joins_items_without_splitting_them():
    assert _pack(["aaaa", "bbbb", "cccc"], 11) == ["aaaa · bbbb", "cccc"]
    assert _pack(["a" * 20, "b"], 10) == ["a" * 20, "b"]
    assert _pack([], 80) == []
