"""``bench-forms``: bench directory's forms-summary.txt: ratio per form [backend=name]."""

from __future__ import annotations

from pathlib import Path

from gpucomm.report._format import fmt_bytes
from gpucomm.report.docs.kinds._tables import md_table
from gpucomm.report.docs.spec import Kind


def render(path: Path, options: dict[str, str]) -> str:
    """``benchmarks/bench_forms.py`` summary (``forms-summary.txt`` in a bench directory): per backend, form, op
    and placement, the median and lowest ratio to the baseline's plain call and the sizes below 0.97
    [backend=name]."""
    source = path / "forms-summary.txt" if path.is_dir() else path
    rows = []
    for line in source.read_text(encoding="utf-8").splitlines():
        parts = line.split()
        if not parts or line.startswith("#") or parts[0] == "backend":
            continue
        backend, form, op, placement, sizes, median, low, *below = parts
        if options.get("backend") not in (None, backend):
            continue
        cells = []
        for cell in below:
            if cell == "-":
                continue
            size, ratio = cell.split(":")
            cells.append(f"{fmt_bytes(int(size.rstrip('B')))}: {ratio}")
        rows.append([backend, form, op, placement, sizes, median, low, ", ".join(cells) or "none"])
    return md_table(["backend", "form", "op", "placement", "sizes", "median ratio", "lowest ratio",
                     "sizes below 0.97"], rows, [False, False, False, False, True, True, True, False])


KIND = Kind("bench-forms", "bench directory's forms-summary.txt: ratio per form [backend=name]",
            render, options=("backend",))
