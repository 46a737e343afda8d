"""``comm-vs-torch``: benchmarks/comm_vs_torch.py .jsonl: per-op ratio summary."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from gpucomm.report._format import fmt_bytes
from gpucomm.report.docs.kinds._tables import checked, jsonl, md_table, value_range
from gpucomm.report.docs.spec import Kind


def render(path: Path, options: dict[str, str]) -> str:
    """``benchmarks/comm_vs_torch.py`` rows: per op, the smallest ratio, the range from 64 MiB up, points below 0.97."""
    by_op: dict[str, list[dict]] = defaultdict(list)
    for r in jsonl(path):
        if r.get("kind") == "comm_vs_torch":
            by_op[r["op"]].append(r)
    rows = []
    for op, rs in by_op.items():
        rs.sort(key=lambda r: r["size_bytes"])
        low = min(rs, key=lambda r: r["ratio"])
        large = [r["ratio"] for r in rs if r["size_bytes"] >= 64 << 20]
        below = [f"{fmt_bytes(r['size_bytes'])}: {r['ratio']:.3f}" for r in rs if r["ratio"] < 0.97]
        rows.append([op, str(len(rs)), f"{low['ratio']:.3f} at {fmt_bytes(low['size_bytes'])}", value_range(large, 3),
                     ", ".join(below) or "none", checked(rs)])
    return md_table(["op", "sizes", "smallest ratio", "ratio at ≥ 64 MiB", "points below 0.97", "checked"],
                    rows, [False, True, True, True, False, False])


KIND = Kind("comm-vs-torch", "benchmarks/comm_vs_torch.py .jsonl: per-op ratio summary", render)
