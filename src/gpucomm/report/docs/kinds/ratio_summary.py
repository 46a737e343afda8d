"""``ratio-summary``: .md results table: per first column, the range of each ratio."""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

from gpucomm.report.docs.kinds._tables import md_rows, md_table, value_range
from gpucomm.report.docs.spec import Kind


def render(path: Path, options: dict[str, str]) -> str:
    """A Markdown results table with ``ratio`` columns: per first-column value, each ratio's range over rows."""
    headers, rows = md_rows(path)
    ratio_cols = [i for i, h in enumerate(headers) if "ratio" in h.lower()]
    names = [headers[i] if headers[i].lower() != "ratio" else f"{headers[i - 1].split(' (')[0]} ratio"
             for i in ratio_cols]
    groups: dict[str, list[list[str]]] = defaultdict(list)
    for r in rows:
        groups[r[0]].append(r)
    out = []
    for key, rs in groups.items():
        cells = [key, str(len(rs))]
        for i in ratio_cols:
            values = [float(r[i]) for r in rs if re.fullmatch(r"[\d.]+", r[i])]
            cells.append(value_range(values, 3))
        out.append(cells)
    return md_table([headers[0], "rows", *(f"{n} (min–max)" for n in names)], out,
                    [False, True, *([True] * len(ratio_cols))])


KIND = Kind("ratio-summary", ".md results table: per first column, the range of each ratio", render)
