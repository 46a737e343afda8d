"""Wrapper ratios by call form, from one ``gpucomm bench`` run: plain, prepared and graph against the raw library.

``gpucomm bench`` measures every form of a wrapper (gpucomm.comm through LocalCommunicator, gpucomm.dist)
in the same run as its baseline (torch.cuda.comm, raw torch.distributed), size by size, the baseline
first and the forms side by side, so each row's ``speedup`` is a same-run, interleaved ratio.  This
script runs that bench (or reads one already run) and prints, per backend, form, op and placement, the
median and minimum ratio over sizes and the sizes below a floor (0.97: the wrapper target of issue 10).

Usage::

    python benchmarks/bench_forms.py --out DIR [bench flags…]   # run gpucomm bench into DIR, then summarise
    python benchmarks/bench_forms.py --records DIR               # summarise an existing run

The summary goes to stdout and to ``DIR/forms-summary.txt``, headed by the command that produced it.
"""

from __future__ import annotations

import argparse
import json
import shlex
import statistics
import subprocess
import sys
from pathlib import Path

FLOOR = 0.97


def summarise(records_dir: Path, floor: float = FLOOR) -> list[str]:
    """Lines of the summary table for the bench rows in ``records_dir``."""
    lines = (records_dir / "records.jsonl").read_text().splitlines()
    rows = [r for r in map(json.loads, lines) if r.get("kind") == "bench"]
    env = next((json.loads(x) for x in lines if json.loads(x).get("kind") == "env"), {})
    series: dict[tuple, list[dict]] = {}
    for r in rows:
        if r.get("speedup") is not None and r["baseline"] != r["backend"]:
            key = (r["backend"], r.get("form", "plain"), r["op"], r["placement"], r["dtype"], r.get("reduce_op"))
            series.setdefault(key, []).append(r)
    out = [f"# bench {records_dir}: {env.get('device_type', '?')}, command: {' '.join(env.get('command', []))}",
           f"# ratio = baseline plain median / this row's median, per size; floor {floor}",
           f"{'backend':<14} {'form':<9} {'op':<15} {'placement':<13} {'sizes':>5} {'median':>7} {'min':>6}  below"]
    for (backend, form, op, placement, _dtype, _rop), rs in series.items():
        ratios = [r["speedup"] for r in rs]
        below = [f"{r['size']}B:{r['speedup']:.2f}" for r in rs if r["speedup"] < floor]
        out.append(f"{backend:<14} {form:<9} {op:<15} {placement:<13} {len(rs):>5} "
                   f"{statistics.median(ratios):>7.3f} {min(ratios):>6.3f}  {' '.join(below) or '-'}")
    wrong = sum(r["wrong"] > 0 for r in rows)
    out.append(f"# {len(rows)} rows, {wrong} with #wrong > 0")
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", help="run gpucomm bench into this new directory first (remaining flags go to bench)")
    p.add_argument("--records", help="summarise this existing bench result directory instead")
    p.add_argument("--floor", type=float, default=FLOOR, help="flag sizes whose ratio is below this (default 0.97)")
    args, bench_flags = p.parse_known_args(argv)
    if (args.out is None) == (args.records is None):
        p.error("give exactly one of --out DIR (run, then summarise) or --records DIR")
    directory = Path(args.records or args.out)
    if args.out is not None:
        cmd = [sys.executable, "-m", "gpucomm", "bench", "--out", str(directory), *bench_flags]
        print("$ " + shlex.join(cmd), flush=True)
        rc = subprocess.call(cmd)
        if rc not in (0, 1):  # 1 = a failed check or floor, still worth summarising
            return rc
    text = "\n".join(summarise(directory, args.floor)) + "\n"
    (directory / "forms-summary.txt").write_text(text)
    print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
