"""Does a calibrated ``gpucomm advise`` give back what it was calibrated from?

Calibrates a profile from result directories (``gpucomm advise --calibrate DIR ...``) and predicts every
configuration the records measured: each train row (strategy, model, devices, global batch) as its preset
layout, and each bench size (op, participants; the fastest backend, which the advisor predicts).  Prints one
Markdown table, measured beside predicted, and the issue's target: every configuration within 10%.

Two forms:

* **CPU (default).**  Makes its own records on this machine, the issue's example: ``gpucomm train --model
  gpt-tiny --devices cpu,cpu --global-batch 32 --strategies single,replicated,ddp`` and ``gpucomm bench
  --backends torch.distributed --ops all_reduce,reduce_scatter,all_gather --nproc 2 -b 4K -e 4M``.  About a
  minute on 2 cores.
* **Given records.**  ``--records DIR [DIR ...]`` (e.g. the committed H200 runs in ``benchmarks/results/``).

Usage::

    python benchmarks/advisor_reproduce.py [--out FILE]
    python benchmarks/advisor_reproduce.py --records benchmarks/results/train-host-r2_h200x1_2026-12-03 \\
        benchmarks/results/advisor-records_h200x1_2026-12-02/* --out FILE
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

TRAIN = ["train", "--model", "gpt-tiny", "--devices", "cpu,cpu", "--global-batch", "32", "--strategies",
         "single,replicated,ddp", "--no-report"]
BENCH = ["bench", "--backends", "torch.distributed", "--ops", "all_reduce,reduce_scatter,all_gather", "--nproc", "2",
         "-b", "4K", "-e", "4M", "-f", "4", "-n", "20"]


def _gpucomm(args: list[str]) -> None:
    proc = subprocess.run([sys.executable, "-m", "gpucomm", *args], stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True, timeout=600)
    if proc.returncode != 0:
        raise SystemExit(f"gpucomm {' '.join(args)} failed (exit {proc.returncode}):\n{proc.stderr[-2000:]}")


def report(dirs: list[str], commands: list[str], argv: list[str]) -> tuple[str, bool]:
    from gpucomm import records
    from gpucomm.advisor import calibrate

    results = records.load(*dirs)
    profile = calibrate.calibrate(results, label=f"{len(dirs)} result directories")
    rows = calibrate.reproduce(profile, results)
    lines = ["# gpucomm advise: does a calibrated profile give back its records?", "",
             "command: python benchmarks/advisor_reproduce.py " + " ".join(argv), ""]
    if commands:
        lines += ["records made by:", ""] + [f"    gpucomm {' '.join(c)}" for c in commands] + [""]
    else:
        lines += ["records: " + ", ".join(dirs), ""]
    lines += [f"profile: {profile.name}", "", "| configuration | measured | predicted | error |",
              "|---|---:|---:|---:|"]
    errs = []
    for r in rows:
        if r["predicted_s"] is None:
            lines.append(f"| {r['what']} | {r['measured_s'] * 1e3:.3f} ms | left out: {r['why']} | |")
            continue
        e = r["predicted_s"] / r["measured_s"] - 1
        errs.append(abs(e))
        lines.append(f"| {r['what']} | {r['measured_s'] * 1e3:.3f} ms | {r['predicted_s'] * 1e3:.3f} ms | {e:+.1%} |")
    ok = bool(errs) and max(errs) <= 0.10
    lines += ["", f"summary: {sum(e <= 0.10 for e in errs)} of {len(errs)} configurations within 10% (worst "
                  f"{max(errs, default=0):.1%}); {sum(r['predicted_s'] is None for r in rows)} left out; target "
                  f"every one within 10%: {'MET' if ok else 'NOT MET'}"]
    return "\n".join(lines) + "\n", ok


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", nargs="+", metavar="DIR", help="calibrate from these instead of new CPU records")
    ap.add_argument("--out", help="also write the report to this file")
    args = ap.parse_args(argv)
    argv = sys.argv[1:] if argv is None else argv
    with tempfile.TemporaryDirectory(prefix="gpucomm-reproduce-") as tmp:
        if args.records:
            dirs, commands = args.records, []
        else:
            dirs = [os.path.join(tmp, "train"), os.path.join(tmp, "bench")]
            commands = [[*TRAIN, "--out", "DIR"], [*BENCH, "--out", "DIR"]]
            _gpucomm([*TRAIN, "--out", dirs[0]])
            _gpucomm([*BENCH, "--out", dirs[1]])
        text, ok = report(dirs, commands, argv)
    print(text, end="")
    if args.out:
        Path(args.out).write_text(text)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
