"""Pool re-predictions of single-GPU runs (``advisor_single_gpu.py --repredict``'s reports) and summarise them:
per case and run the error, then the median and worst |error| of device-bound cases (no per-op checkpointing,
not gpt-650m-mb8, which slow hosts pace), of host-paced ones and of all.

Usage::

    python benchmarks/advisor_repredict_summary.py --label final benchmarks/results/*-repredict-final_cpu_*.txt
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
from pathlib import Path

_ROW = re.compile(r"^\| (?P<case>[^|]+?) \| [^|]+ \| [^|]+ \| (?P<ac>\w+) \| [^|]+ \| (?P<meas>[\d,.]+) ms \| "
                  r"(?P<pred>[\d,.]+) ms \| (?P<err>[+-][\d.]+)% \|")
HOST_PACED = ("gpt-650m-mb8",)
"""Cases whose step a slow host paces without per-op checkpointing (full checkpointing: 104-114 ms on five
machines, 124-133 ms on three)."""


def rows(path: Path) -> list[tuple[str, str, float]]:
    """(case, ac, error %) of each case row of one report."""
    out = []
    for line in path.read_text().splitlines():
        m = _ROW.match(line)
        if m:
            out.append((m["case"], m["ac"], float(m["err"])))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--label", default="")
    ap.add_argument("reports", nargs="+")
    args = ap.parse_args(argv)
    groups: dict[str, list[float]] = {"device-bound": [], "host-paced (op, gpt-650m-mb8)": [], "all": []}
    lines = [f"## {args.label or 're-predictions'}", "", "| run | case | ac | error |", "|---|---|---|---:|"]
    for rep in map(Path, args.reports):
        run = rep.name.split("_")[0].replace("advisor-single-gpu-", "")
        for case, ac, err in rows(rep):
            lines.append(f"| {run} | {case} | {ac} | {err:+.1f}% |")
            paced = ac == "op" or case in HOST_PACED
            groups["host-paced (op, gpt-650m-mb8)" if paced else "device-bound"].append(abs(err))
            groups["all"].append(abs(err))
    lines.append("")
    for name, v in groups.items():
        if v:
            lines.append(f"- {name}: {len(v)} cases, median |error| {statistics.median(v):.1f}%, worst {max(v):.1f}%, "
                         f"within 10%: {sum(x <= 10 for x in v)}/{len(v)}, within 15%: {sum(x <= 15 for x in v)}/{len(v)}")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
