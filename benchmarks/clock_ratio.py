"""The sustained SM clock of one GPU model over another's, under the same training load: the compute factor of a
profile derived across GPUs of one die (:mod:`gpucomm.advisor.compute.derive`).

Why: the H100 SXM and the H200 are the same GH100 die at the same 700 W limit, and the derivation's compute-bound
time is the H200's x (H200 sustained clock / H100 sustained clock).  Which clock each sustains is a measurement:
the HBM3e stacks of the H200 draw more of the shared 700 W than the H100's HBM3, so the die may get less.  The
input is :mod:`benchmarks.sustained_clock`'s reports, run on each GPU with the same script and shapes (a layer's
forward and backward back to back for seconds; NVML's SM clock read at every synchronisation; ``settled`` is the
median over the run's second half).  A shape counts only where every run on both GPUs settled below its burst
clock — there the power limit set the clock; a shape that stays at the boost clock on either (llama-160m on both)
says nothing about the limit.  Per shape, each GPU's runs are averaged; the factor is the median of the shapes'
ratios.  Nothing is fitted: clocks read, divided, one median.

A second reading beside it (``--cases``): the one NVML sample per case that ``advisor_single_gpu.py`` takes while
a case's timed steps run (its ``.json`` sidecars), per case the median over every run of each GPU, over the cases
whose median power is within 5% of the limit on both GPUs.  One sample a case is not a sustained clock, so this
corroborates and is not the factor.

Usage (CPU; reads committed reports)::

    python benchmarks/clock_ratio.py --base benchmarks/results/sustained-clock_h200x1_2026-12-04.txt \\
        benchmarks/results/sustained-clock-r2_h200x1_2026-12-04.txt \\
        --target benchmarks/results/sustained-clock_h100x1_2026-12-06/sustained-clock_h100x1_2026-12-06.txt \\
        --cases 'benchmarks/results/**/advisor-single-gpu*_h200x1_*.json' \\
        'benchmarks/results/**/advisor-single-gpu*_h100x1_*.json' \\
        --out benchmarks/results/clock-ratio_h200-h100_2026-12-06.txt
"""

from __future__ import annotations

import argparse
import datetime as _dt
import glob
import json
import re
import shlex
import statistics
import sys
from pathlib import Path

from _report import emit

_SHAPE = re.compile(r"^## (?P<name>.+?): ")
_BURST = re.compile(r"^burst .*?: [\d.]+ ms; SM (?P<mhz>\d+) MHz")
_SETTLED = re.compile(r"^settled \(second half of the run\): [\d.]+ ms, SM (?P<mhz>\d+) MHz, (?P<w>\d+) W")
_DEVICE = re.compile(r"device: (?P<gpu>[^;]+);")
POWER_SHARE = 0.95
"""A case whose median power is at least this share of the limit ran at the limit (``--cases``)."""


class InputError(ValueError):
    """A report this cannot read: the message names it and says what was expected."""


def read_report(path: str, flag: str = "report") -> tuple[str, dict[str, tuple[float, float]]]:
    """(GPU name, {shape: (burst MHz, settled MHz)}) of one ``sustained_clock.py`` report; ``flag`` (``--base``,
    ``--target``) names the argument it came from in any error."""
    try:
        text = Path(path).read_text()
    except OSError as e:
        raise InputError(f"{flag} {path}: cannot read it ({e.strerror}); pass a sustained_clock.py report") from None
    gpu, shapes, name, burst = "", {}, None, None
    for line in text.splitlines():
        if (m := _DEVICE.search(line)) and not gpu:
            gpu = m["gpu"].strip()
        if m := _SHAPE.match(line):
            name, burst = m["name"], None
        elif (m := _BURST.match(line)) and name:
            burst = float(m["mhz"])
        elif (m := _SETTLED.match(line)) and name and burst is not None:
            shapes[name] = (burst, float(m["mhz"]))
    if not shapes:
        raise InputError(f"{flag} {path}: no '## shape' with its burst and settled clocks; pass a sustained_clock.py "
                         "report")
    return gpu, shapes


def ratio(base: list[str], target: list[str]) -> tuple[list[str], float]:
    """The report lines and the factor (base's sustained clock over target's, median over power-limited shapes)."""
    runs = {"base": [read_report(p, "--base") for p in base], "target": [read_report(p, "--target") for p in target]}
    gpus = {side: sorted({g for g, _ in rs}) for side, rs in runs.items()}
    lines = [f"base: {', '.join(gpus['base'])} ({len(base)} runs); target: {', '.join(gpus['target'])} "
             f"({len(target)} runs)", "",
             "| shape | base settled MHz (runs) | target settled MHz (runs) | power-limited on both | base / target |",
             "|---|---|---|---|---:|"]
    common = set.intersection(*(set(s) for rs in runs.values() for _, s in rs))
    ratios = []
    for shape in sorted(common):
        per = {side: [s[shape] for _, s in rs] for side, rs in runs.items()}
        limited = all(settled < burst for pts in per.values() for burst, settled in pts)
        mean = {side: statistics.fmean(settled for _, settled in pts) for side, pts in per.items()}
        r = mean["base"] / mean["target"]
        if limited:
            ratios.append(r)
        lines.append(f"| {shape} | {mean['base']:.0f} ({', '.join(f'{s:.0f}' for _, s in per['base'])}) | "
                     f"{mean['target']:.0f} ({', '.join(f'{s:.0f}' for _, s in per['target'])}) | "
                     f"{'yes' if limited else 'no (boost clock)'} | {r:.4f} |")
    if not ratios:
        raise InputError("no shape settled below its burst clock on every run of both GPUs: nothing says what "
                         "the power limit does; pass reports of shapes that load the GPU to its limit")
    factor = statistics.median(ratios)
    lines += ["", f"factor (median over {len(ratios)} power-limited shapes): {factor:.4f}"]
    return lines, factor


def cases(base_glob: str, target_glob: str) -> list[str]:
    """The per-case NVML reading of single-GPU runs, base over target (corroboration; module docstring)."""
    def pool(pattern: str) -> tuple[dict[str, list[tuple[float, float]]], int]:
        by: dict[str, list[tuple[float, float]]] = {}
        files = sorted(glob.glob(pattern, recursive=True))
        for f in files:
            for c in json.loads(Path(f).read_text()).get("cases", []):
                if c.get("sm_mhz") and c.get("power_w"):
                    by.setdefault(c["case"], []).append((float(c["sm_mhz"]), float(c["power_w"])))
        return by, len(files)

    (b, nb), (t, nt) = pool(base_glob), pool(target_glob)
    lines = ["", f"per-case NVML samples of single-GPU runs ({nb} base runs, {nt} target runs; one sample a case "
             f"while its timed steps ran; cases at >= {POWER_SHARE:.0%} of 700 W on both):", "",
             "| case | base median MHz, W (n) | target median MHz, W (n) | base / target |", "|---|---|---|---:|"]
    ratios = []
    for case in sorted(set(b) & set(t)):
        mb, mt = (statistics.median(x for x, _ in v) for v in (b[case], t[case]))
        wb, wt = (statistics.median(w for _, w in v) for v in (b[case], t[case]))
        if min(wb, wt) < POWER_SHARE * 700.0:
            continue
        ratios.append(mb / mt)
        lines.append(f"| {case} | {mb:.0f}, {wb:.0f} W ({len(b[case])}) | {mt:.0f}, {wt:.0f} W ({len(t[case])}) | "
                     f"{mb / mt:.4f} |")
    if ratios:
        lines += ["", f"per-case median over {len(ratios)} cases: {statistics.median(ratios):.4f} (corroboration, "
                  "not the factor)"]
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", nargs="+", required=True, help="sustained_clock.py reports of the measured GPU")
    ap.add_argument("--target", nargs="+", required=True, help="sustained_clock.py reports of the derived GPU")
    ap.add_argument("--cases", nargs=2, metavar=("BASE_GLOB", "TARGET_GLOB"),
                    help="advisor_single_gpu.py .json sidecars of each GPU (quoted globs)")
    ap.add_argument("--out", help="also write the report to this file")
    args = ap.parse_args(argv)
    try:
        lines, _ = ratio(args.base, args.target)
    except InputError as e:
        print(f"clock_ratio: error: {e}", file=sys.stderr)
        return 2
    if args.cases:
        lines += cases(*args.cases)
    head = ["# Sustained SM clock, measured GPU over derived GPU, under the same layer loads", "",
            "command: python " + shlex.join(["benchmarks/clock_ratio.py", *(sys.argv[1:] if argv is None else argv)]),
            f"date: {_dt.date.today().isoformat()}; run on CPU (reads the reports)", ""]
    text = "\n".join(head + lines) + "\n"
    return emit(text, args.out)


if __name__ == "__main__":
    sys.exit(main())
