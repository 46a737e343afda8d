"""``train-vs-plain``: benchmarks/train_vs_plain.py .txt: medians per side, ratios to plain."""

from __future__ import annotations

import re
import statistics
from collections import defaultdict
from pathlib import Path

from gpucomm.report._format import fmt_float
from gpucomm.report.docs.kinds._tables import md_table
from gpucomm.report.docs.spec import Kind


def render(path: Path, options: dict[str, str]) -> str:
    """``benchmarks/train_vs_plain.py`` output: per side, medians over rounds, and the summary ratios to plain."""
    rounds: dict[str, list[list[str]]] = defaultdict(list)
    ratios: dict[str, tuple[str, str]] = {}
    header: list[str] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        parts = line.split()
        if not parts or line.startswith("#"):
            continue
        if parts[0] == "round":
            header = parts
        elif header and len(parts) == len(header) and parts[0].isdigit():
            rounds[parts[1]].append(parts)
        elif m := re.match(r"(\w+)/plain time ([\d.]+x).*?memory ([\d.]+x)", line):
            ratios[m.group(1)] = (m.group(2), m.group(3))

    def med(rows: list[list[str]], col: str) -> str:
        values = [float(r[header.index(col)]) for r in rows if r[header.index(col)] != "-"]
        return fmt_float(statistics.median(values), 3) if values else "—"

    out = [[side, str(len(rs)), med(rs, "mean_ms"), med(rs, "median_ms"), med(rs, "host_ms"), med(rs, "gpu_ms"),
            med(rs, "peak_GiB"), *ratios.get(side, ("1 (the baseline)", "1 (the baseline)"))]
           for side, rs in rounds.items()]
    return md_table(["side", "rounds", "window mean (ms)", "per-step median (ms)", "host (ms)", "GPU (ms)",
                     "peak (GiB)", "time vs plain", "memory vs plain"], out,
                    [False, True, True, True, True, True, True, True, True])


KIND = Kind("train-vs-plain", "benchmarks/train_vs_plain.py .txt: medians per side, ratios to plain", render)
