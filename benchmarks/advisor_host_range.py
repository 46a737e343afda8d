"""Would a range bracket a host-paced step?  Each run's cases priced at the slowest and the fastest of its probe's
rounds, against what they measured.

``--host this`` prices the host at the median of its probe's rounds and prints their spread ("one round's
4.94-6.38 ms a layer").  A step the host paces moves with the host (benchmarks/results/host-speed_h200x1_
2026-12-04.txt: the CPU core's own pace spread 2.62x over 0.3 s windows), so a figure is the wrong shape for
its answer; would the range of the rounds be the right one?  For each run whose report printed each family's
round range (since 2026-12-04's sixth session), this prices every case again at the low and at the high end of
both families' ranges and, for the cases the range moves (host-paced ones: more than 2% between the ends),
says whether the measured step fell inside.  No training: ``advisor_single_gpu.py --repredict`` of a copy of
the run's sidecar whose readings are rewritten (:func:`advisor_host_rule.step_errors`).  Usage::

    PYTHONPATH=src python benchmarks/advisor_host_range.py --out benchmarks/results/advisor-host-range_cpu_DATE.txt \\
        benchmarks/results/advisor-single-gpu-r24_h200x1_2026-12-04.json ...
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import re
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for _p in (ROOT / "src", ROOT / "benchmarks"):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

_RANGE = re.compile(r"(?P<fam>gpt|llama) \d+-wide \d+x\d+ op steps of \d+ and \d+ layers: [\d.]+ ms a layer here "
                    r"\(medians of \d+; one round's (?P<lo>[\d.]+)-(?P<hi>[\d.]+)\)")
MOVES = 1.02
"""A case whose price moves more than this between the range's ends is one the host paces; the report says how
far the others moved."""


def round_ranges(report: str) -> dict[str, tuple[float, float]]:
    """Per family, (fastest, slowest) round's marginal a layer (seconds) the probe printed before the cases."""
    before = report.split("the advisor's assumptions", 1)[-1]
    return {m["fam"]: (float(m["lo"]) / 1e3, float(m["hi"]) / 1e3) for m in _RANGE.finditer(before)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", help="also write the report here")
    ap.add_argument("runs", nargs="+", help="advisor_single_gpu.py sidecars (.json) of GPU runs")
    args = ap.parse_args(argv)
    from advisor_host_rule import bad_run, step_errors

    bad = bad_run(args.runs, report=True)
    if bad:
        print(f"advisor_host_range: error: {bad}", file=sys.stderr)
        return 2
    import advisor_single_gpu as bench

    lines: list[str] = []

    def say(line: str = "") -> None:
        lines.append(line)
        print(line, flush=True)

    say("# Would the range of the probe's rounds bracket a host-paced step?")
    say()
    say(f"command: python benchmarks/advisor_host_range.py {' '.join(argv if argv is not None else sys.argv[1:])}")
    say(f"date: {_dt.date.today().isoformat()}; predicted on CPU with the shipped H200 profile at the fastest and the "
        "slowest round of each run's probe before its cases, both families at the same end")
    say()
    say("| run | case | measured | priced at the fastest round | at the slowest | inside |")
    say("|---|---|---:|---:|---:|---|")
    inside = total = 0
    still = 1.0  # the most a case left out moved between the ends
    with tempfile.TemporaryDirectory() as tmp:
        for run in args.runs:
            ranges = round_ranges(Path(run).with_suffix(".txt").read_text())
            if not ranges:
                say(f"| {Path(run).stem} | its report printed no round ranges: left out | | | | |")
                continue
            side = json.loads(Path(run).read_text())
            measured = {c: m.step_s for c, (m, _) in bench.read_measured(run).items()}
            ends = []
            for k in (0, 1):
                side["host_here_s"] = {f"{fam} op": r[k] for fam, r in ranges.items()}
                ends.append(step_errors(bench, side, Path(tmp)))
            for case, meas in measured.items():
                lo, hi = (meas * (1 + e[case] / 100) for e in ends)
                if hi <= lo * MOVES:
                    still = max(still, hi / lo)
                    continue
                ok = lo <= meas <= hi
                inside += ok
                total += 1
                say(f"| {Path(run).stem.replace('advisor-single-gpu-', '')} | {case} | {meas * 1e3:,.1f} ms | "
                    f"{lo * 1e3:,.1f} ms | {hi * 1e3:,.1f} ms | {'yes' if ok else 'no'} |")
    say()
    if total:
        say(f"host-paced case-runs whose measured step fell inside the range: {inside} of {total} (the other "
            f"cases' price moved at most {still - 1:.1%} between the ends)")
    if args.out:
        Path(args.out).write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
