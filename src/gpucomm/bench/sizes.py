"""Message sizes: ``K``/``M``/``G`` parsing and the geometric sweep, as in nccl-tests' ``-b -e -f``.

Suffixes are powers of two (``64K`` = 65,536 bytes), matching nccl-tests and the KiB/MiB/GiB units
of ``docs/performance.md``; a trailing ``B``/``iB`` is accepted (``1MiB``, ``1MB`` both mean 2^20).
"""

from __future__ import annotations

import re

__all__ = ["format_size", "parse_size", "size_sweep"]

_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:I?B)?\s*$", re.IGNORECASE)


def parse_size(text: str | int, arg: str = "size") -> int:
    """Parse ``"8"``, ``"64K"``, ``"1.5M"``, ``"2GiB"`` (or an int) into bytes.

    Raises:
        ValueError: negative, not a number, an unknown suffix, or a fraction of a byte.
    """
    if isinstance(text, bool):
        raise ValueError(f"{arg}: expected a size in bytes such as 64K, but got {text!r}")
    if isinstance(text, int):
        value = text
    else:
        match = _SIZE_RE.match(str(text))
        if not match:
            raise ValueError(f"{arg}: expected a non-negative size such as 8, 64K, 32M or 1G, but got {text!r}")
        number, unit = match.groups()
        exact = float(number) * _UNITS[unit.upper()]
        if exact != int(exact):
            raise ValueError(f"{arg}: {text!r} is not a whole number of bytes; use e.g. 1536 instead of 1.5K")
        value = int(exact)
    if value < 0:
        raise ValueError(f"{arg}: expected a non-negative size, but got {value}")
    return value


def size_sweep(minbytes: int, maxbytes: int, stepfactor: int) -> list[int]:
    """Sizes ``minbytes, minbytes*f, …`` up to and including ``maxbytes`` (nccl-tests ``-b -e -f``).

    ``maxbytes`` is always the last size, even when it is not a power of ``f`` times ``minbytes``.
    A minimum of 0 starts the sweep at 1 byte after the 0-byte size (so a factor can grow it).
    """
    if minbytes < 0 or maxbytes < 0:
        raise ValueError(f"sizes: expected non-negative sizes, but got -b {minbytes} -e {maxbytes}")
    if minbytes > maxbytes:
        raise ValueError(f"sizes: --minbytes {minbytes} is larger than --maxbytes {maxbytes}; swap them")
    if not isinstance(stepfactor, int) or stepfactor < 2:
        raise ValueError(f"--stepfactor: expected an integer >= 2, but got {stepfactor!r}")
    sizes = [minbytes] if minbytes == 0 else []
    size = max(minbytes, 1)
    while size < maxbytes:
        sizes.append(size)
        size *= stepfactor
    sizes.append(maxbytes)
    return sorted(set(sizes))


def format_size(nbytes: int) -> str:
    """``1048576`` → ``"1 MiB"``; sizes that are not whole units print in bytes."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= scale and nbytes % scale == 0:
            return f"{nbytes // scale} {unit}"
    return f"{nbytes} B"
