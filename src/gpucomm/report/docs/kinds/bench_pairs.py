"""``bench-pairs``: gpucomm bench directory: speedup per op and backend pair [ops=a,b]."""

from __future__ import annotations

import statistics
from collections import defaultdict
from pathlib import Path

from gpucomm.report._format import fmt_bytes, fmt_float
from gpucomm.report.docs.kinds._tables import md_table, value_range
from gpucomm.report.docs.spec import Kind


def render(path: Path, options: dict[str, str]) -> str:
    """A ``gpucomm bench`` result directory: per op and backend pair, speedups below 1 MiB and from 64 MiB up."""
    from gpucomm.records import load

    ops = options.get("ops", "").split(",") if options.get("ops") else None
    rows_by: dict[tuple, list] = defaultdict(list)
    for r in load(path).bench:
        if r.speedup is None or r.baseline in (None, r.backend) or r.wrong > 0:
            continue
        if ops is None or r.op in ops:
            rows_by[(r.op, r.backend, r.form, r.baseline)].append(r)
    rows = []
    for (op, backend, form, baseline), rs in rows_by.items():
        small = [r.speedup for r in rs if r.size < 1 << 20]
        large = [r for r in rs if r.size >= 64 << 20]
        low = min(large, key=lambda r: r.speedup) if large else None
        rows.append([op, backend + ("" if form == "plain" else f" ({form})"), baseline, str(len(rs)),
                     fmt_float(statistics.median(small)) if small else "—",
                     value_range([r.speedup for r in large]),
                     f"{low.speedup:.2f} ({low.placement}, {fmt_bytes(low.size)})" if low else "—"])
    return md_table(["op", "backend", "baseline", "rows", "median < 1 MiB", "range ≥ 64 MiB", "lowest ≥ 64 MiB"],
                    rows, [False, False, False, True, True, True, False])


KIND = Kind("bench-pairs", "gpucomm bench directory: speedup per op and backend pair [ops=a,b]",
            render, options=("ops",))
