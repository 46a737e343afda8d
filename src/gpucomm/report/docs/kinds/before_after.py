"""``before-after``: interleaved before/after text tables: medians and the change."""

from __future__ import annotations

import statistics
from pathlib import Path

from gpucomm.report._format import fmt_float
from gpucomm.report.docs.kinds._tables import md_table
from gpucomm.report.docs.spec import Kind


def render(path: Path, options: dict[str, str]) -> str:
    """Interleaved before/after whitespace tables (``# ... before`` / ``# ... after`` blocks, first column a name):
    per row, the median of the first numeric column before and after, and the change."""
    tables: list[dict[str, float]] = []
    current: dict[str, float] | None = None
    for line in path.read_text(encoding="utf-8").splitlines():
        parts = line.split()
        if line.startswith("#") or not parts:
            current = None
            continue
        if current is None:
            current = {}
            tables.append(current)
            continue  # the header line
        current[parts[0]] = float(parts[1])
    before = [t for k, t in enumerate(tables) if k % 2 == 0]
    after = [t for k, t in enumerate(tables) if k % 2 == 1]
    rows = []
    for name in before[0]:
        b = statistics.median(t[name] for t in before)
        a = statistics.median(t[name] for t in after)
        rows.append([name, fmt_float(b), fmt_float(a), f"{100 * (a - b) / b:+.0f}%"])
    return md_table(["method", f"before (median of {len(before)})", f"after (median of {len(after)})", "change"],
                    rows, [False, True, True, True])


KIND = Kind("before-after", "interleaved before/after text tables: medians and the change", render)
