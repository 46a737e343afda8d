"""Number and label formatting shared by every report renderer (terminal, Markdown, HTML, plots).

One place decides how a size, a time, a bandwidth or a ratio is written, so the terminal table, the
Markdown file and the HTML page show the same digits for the same record.

Units, as in :mod:`gpucomm.records`: sizes in bytes, written with binary prefixes (KiB = 2^10 B);
times in microseconds or milliseconds; bandwidths in GB/s = 10^9 bytes/s per direction.  A value that
was not measured (``None``) is written as an em dash, never as 0.
"""

from __future__ import annotations

import math
from typing import Any

__all__ = [
    "MISSING",
    "fmt_bytes",
    "fmt_float",
    "fmt_int",
    "fmt_mem",
    "fmt_pct",
    "fmt_speedup",
    "fmt_wrong",
    "is_wrong",
]

MISSING = "—"
"""What a value that was not measured or does not apply is written as."""

_BINARY = (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10))


def fmt_bytes(nbytes: int | None) -> str:
    """``nbytes`` with the largest binary prefix that divides it evenly ("4 KiB", "1.5 MiB" otherwise)."""
    if nbytes is None:
        return MISSING
    for unit, scale in _BINARY:
        if nbytes >= scale:
            value = nbytes / scale
            return f"{value:.0f} {unit}" if value == int(value) else f"{value:.3g} {unit}"
    return f"{nbytes} B"


def fmt_mem(nbytes: int | None) -> str:
    """A memory amount in GiB with two decimals (memory is compared, not read exactly)."""
    if nbytes is None:
        return MISSING
    return f"{nbytes / (1 << 30):.2f} GiB"


def fmt_float(value: float | None, digits: int = 2) -> str:
    """A float with ``digits`` decimals; thousands separated so large throughputs stay readable."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return MISSING
    return f"{value:,.{digits}f}"


def fmt_int(value: int | None) -> str:
    """An int as written, or the missing mark."""
    return MISSING if value is None else str(value)


def fmt_pct(fraction: float | None) -> str:
    """A 0..1 fraction as a percentage with one decimal."""
    if fraction is None:
        return MISSING
    return f"{100.0 * fraction:.1f}%"


def fmt_speedup(speedup: float | None) -> str:
    """A time ratio as "1.23x"; missing when the row is its own baseline or has none."""
    if speedup is None:
        return MISSING
    return f"{speedup:.2f}x"


def is_wrong(record: Any) -> bool:
    """Whether a bench row reported elements that differ from the expected result (``wrong > 0``)."""
    return record.wrong > 0


def fmt_wrong(wrong: int) -> str:
    """The #wrong column: the count, "n/c" when not checked (-1), and a visible mark when non-zero."""
    if wrong < 0:
        return "n/c"
    return f"{wrong} WRONG" if wrong > 0 else "0"
