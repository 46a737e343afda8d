"""gpucomm.report._format: one way to write each number, with a mark for values not measured."""

import math
from types import SimpleNamespace

import pytest

from gpucomm.report._format import (
    MISSING,
    fmt_bytes,
    fmt_float,
    fmt_int,
    fmt_mem,
    fmt_pct,
    fmt_speedup,
    fmt_wrong,
    is_wrong,
)


@pytest.mark.parametrize("nbytes, text", [
    (0, "0 B"), (8, "8 B"), (1023, "1023 B"), (1024, "1 KiB"), (1536, "1.5 KiB"),
    (4 << 20, "4 MiB"), (3 << 29, "1.5 GiB"), (256 << 30, "256 GiB"), (1000, "1000 B"),
])
def test_fmt_bytes_uses_the_largest_binary_prefix(nbytes, text):
    assert fmt_bytes(nbytes) == text


def test_missing_values_are_a_dash_never_zero():
    assert MISSING == "—"
    for fn in (fmt_bytes, fmt_mem, fmt_float, fmt_int, fmt_pct, fmt_speedup):
        assert fn(None) == MISSING, fn
    assert fmt_float(math.nan) == MISSING and fmt_float(math.inf) == MISSING


def test_numbers_are_written_with_their_units_and_digits():
    assert fmt_mem(3 << 29) == "1.50 GiB"
    assert fmt_float(12345.678) == "12,345.68" and fmt_float(1.25, digits=1) == "1.2"
    assert fmt_float(0.0) == "0.00"
    assert fmt_int(0) == "0" and fmt_int(42) == "42"
    assert fmt_pct(0.1234) == "12.3%" and fmt_pct(1.0) == "100.0%"
    assert fmt_speedup(1.234) == "1.23x"


def test_wrong_counts_are_marked_and_unchecked_rows_say_so():
    assert fmt_wrong(-1) == "n/c" and fmt_wrong(0) == "0" and fmt_wrong(3) == "3 WRONG"
    assert is_wrong(SimpleNamespace(wrong=1)) and not is_wrong(SimpleNamespace(wrong=0))
    assert not is_wrong(SimpleNamespace(wrong=-1))
