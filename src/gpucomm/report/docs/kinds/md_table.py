"""``md-table``: .md results file: its first table as is [cols=0,1,4]."""

from __future__ import annotations

import re
from pathlib import Path

from gpucomm.report.docs.kinds._tables import md_rows, md_table
from gpucomm.report.docs.spec import Kind


def render(path: Path, options: dict[str, str]) -> str:
    """The first Markdown table of a results file, as it is (optionally only ``cols=0,1,4``: 0-based columns)."""
    headers, rows = md_rows(path)
    keep = list(range(len(headers)))
    if options.get("cols"):
        keep = [int(i) for i in options["cols"].split(",")]
    numeric = [all(re.fullmatch(r"[\d.,%×x—-]+", r[i] or "—") for r in rows) for i in keep]
    return md_table([headers[i] for i in keep], [[r[i] for i in keep] for r in rows], numeric)


KIND = Kind("md-table", ".md results file: its first table as is [cols=0,1,4]", render, options=("cols",))
