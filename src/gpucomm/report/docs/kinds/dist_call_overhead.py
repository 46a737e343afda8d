"""``dist-call-overhead``: benchmarks/dist_call_overhead.py .txt: +µs and ratios per op."""

from __future__ import annotations

import statistics
from collections import defaultdict
from pathlib import Path

from gpucomm.report.docs.kinds._tables import md_rows, md_table
from gpucomm.report.docs.spec import Kind


def render(path: Path, options: dict[str, str]) -> str:
    """``benchmarks/dist_call_overhead.py`` .txt: per op, the host µs a plain call adds (median, most), the lowest
    prepared/raw ratio (device and host time), the prepared cells below 0.97; then the file's summary lines."""
    headers, table = md_rows(path)
    col = {h: i for i, h in enumerate(headers)}
    by_op: dict[str, list[list[str]]] = defaultdict(list)
    for r in table:
        by_op[r[col["op"]]].append(r)

    def low(rs: list[list[str]], name: str) -> str:
        r = min(rs, key=lambda r: float(r[col[name]]))
        return f"{r[col[name]]} at {r[col['size']]}"

    rows = []
    for op, rs in by_op.items():
        added = [float(r[col["plain +µs"]]) for r in rs]
        most = max(rs, key=lambda r: float(r[col["plain +µs"]]))
        below = [f"{r[col['size']]}: {r[col['prepared/raw dev']]}" for r in rs if float(r[col["prepared/raw dev"]]) < 0.97]
        rows.append([op, str(len(rs)), f"{statistics.median(added):+.2f}", f"{most[col['plain +µs']]} at {most[col['size']]}",
                     low(rs, "plain/raw dev"), low(rs, "prepared/raw dev"), low(rs, "prepared/raw"),
                     ", ".join(below) or "none"])
    out = md_table(["op", "sizes", "plain +µs, median", "plain +µs, most", "lowest plain/raw (device)",
                    "lowest prepared/raw (device)", "lowest prepared/raw (host)", "prepared/raw (device) below 0.97"],
                   rows, [False, True, True, True, True, True, True, False])
    lines = path.read_text(encoding="utf-8").splitlines()
    last = max(i for i, line in enumerate(lines) if line.startswith("|"))
    notes = [f"- {line.lstrip('# ').strip()}" for line in lines[last + 1:] if line.startswith("#")]
    return out + ("\n\nThe file's own summary lines:\n\n" + "\n".join(notes) if notes else "")


KIND = Kind("dist-call-overhead", "benchmarks/dist_call_overhead.py .txt: +µs and ratios per op", render)
