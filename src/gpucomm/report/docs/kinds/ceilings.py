"""``ceilings``: benchmarks/ceilings.py .jsonl: GB/s per copy kind."""

from __future__ import annotations

from pathlib import Path

from gpucomm.report._format import fmt_float
from gpucomm.report.docs.kinds._tables import jsonl, md_table
from gpucomm.report.docs.spec import Kind


def render(path: Path, options: dict[str, str]) -> str:
    """``benchmarks/ceilings.py`` rows: what was copied and its GB/s."""
    rows = [[r["what"], fmt_float(r["gbps"], 1)] for r in jsonl(path)]
    return md_table(["what", "GB/s"], rows, [False, True])


KIND = Kind("ceilings", "benchmarks/ceilings.py .jsonl: GB/s per copy kind", render)
