"""``communicator-overhead``: benchmarks/communicator_overhead.py .jsonl: plain/prepared vs torch per op."""

from __future__ import annotations

import statistics
from collections import defaultdict
from pathlib import Path

from gpucomm.report._format import fmt_bytes
from gpucomm.report.docs.kinds._tables import jsonl, md_table
from gpucomm.report.docs.spec import Kind


def render(path: Path, options: dict[str, str]) -> str:
    """``benchmarks/communicator_overhead.py`` .jsonl: per op, the plain and prepared ratios to torch.cuda.comm
    (minimum and median over sizes), the host µs a plain call adds over torch, and the prepared cells below 0.97."""
    by_op: dict[str, list[dict]] = defaultdict(list)
    for r in jsonl(path):
        if r.get("kind") == "row":
            by_op[r["op"]].append(r)
    rows = []
    for op, rs in by_op.items():
        rs.sort(key=lambda r: r["size_bytes"])
        added = [r["plain_us"] - r["torch_us"] for r in rs]
        worst = max(range(len(rs)), key=lambda i: added[i])
        plain = [r["plain_ratio"] for r in rs]
        prepared = [r["prepared_ratio"] for r in rs]
        below = [f"{fmt_bytes(r['size_bytes'])}: {r['prepared_ratio']:.3f}" for r in rs if r["prepared_ratio"] < 0.97]
        over = [fmt_bytes(r["size_bytes"]) for r, a in zip(rs, added, strict=True) if a > 2]
        rows.append([op, str(len(rs)), f"{min(plain):.3f} / {statistics.median(plain):.3f}",
                     f"{min(prepared):.3f} / {statistics.median(prepared):.3f}", ", ".join(below) or "none",
                     f"{statistics.median(added):+.2f}", f"{added[worst]:+.2f} at {fmt_bytes(rs[worst]['size_bytes'])}",
                     f"{len(over)} ({', '.join(over)})" if over else "0"])
    return md_table(["op", "sizes", "plain ratio min / median", "prepared ratio min / median",
                     "prepared below 0.97", "plain − torch µs, median", "plain − torch µs, most",
                     "sizes where plain adds > 2 µs"],
                    rows, [False, True, True, True, False, True, True, False])


KIND = Kind("communicator-overhead", "benchmarks/communicator_overhead.py .jsonl: plain/prepared vs torch per op",
            render)
