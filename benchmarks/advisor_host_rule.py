"""Which host reading should price which family's layers?  Each single-GPU run's own probe readings, applied by
different rules, priced again on CPU against that run's measurements.

``--host this`` reads the host per family (GPT's and Llama's ``op`` steps each over the profile's host time of
that family) and scales each family's host time by its own reading (``ProfileSource.host_ratio``).  The host
is one CPU, so one reading for every family is the simpler rule; this compares, for every run whose probe
recorded both families' readings:

* ``family``: each family's own reading (the shipped rule);
* ``geo``: the geometric mean of the two, for both;
* ``gpt`` / ``llama``: one family's reading for both;
* ``profile``: no reading (the profile's host, x1).

and prints per run the median and worst |error| of the step time under each rule, then how often each rule
had the lowest worst |error|.  No training: ``advisor_single_gpu.py --repredict`` of a copy of the run's sidecar
whose readings the rule rewrote.  Usage::

    PYTHONPATH=src python benchmarks/advisor_host_rule.py --out benchmarks/results/advisor-host-rule_cpu_DATE.txt \\
        benchmarks/results/advisor-single-gpu-r2{0,1}_h200x1_2026-12-04.json ...
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as _dt
import io
import json
import math
import re
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for _p in (ROOT / "src", ROOT / "benchmarks"):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

RULES = ("family", "geo", "gpt", "llama", "profile")
_ERR = re.compile(r"^\| (?P<case>[^|]+?) \|(?:[^|]*\|){6} (?P<err>[+-][\d.]+)% \|")


def ratios_by_rule(g: float, l: float) -> dict[str, tuple[float, float]]:  # noqa: E741 (llama)
    """(GPT's, Llama's) host ratio under each rule (module docstring) from the run's readings ``g``, ``l``."""
    geo = math.sqrt(g * l)
    return {"family": (g, l), "geo": (geo, geo), "gpt": (g, g), "llama": (l, l), "profile": (1.0, 1.0)}


def bad_run(runs: list[str], *, report: bool = False) -> str | None:
    """What is wrong with the first of ``runs`` that is not a readable sidecar of a GPU run (with its text report
    beside it when ``report``), in the words of a one-line error; ``None`` when every one is."""
    for run in runs:
        p = Path(run)
        got = ("not a .json sidecar" if p.suffix != ".json" else "no such file" if not p.is_file() else
               f"no report {p.with_suffix('.txt').name} beside it" if report and not p.with_suffix(".txt").is_file()
               else None)
        if got is None:
            try:
                json.loads(p.read_text())["cases"]
            except (OSError, ValueError, KeyError, TypeError):
                got = "not an advisor_single_gpu.py sidecar"
        if got:
            return (f"runs: expected advisor_single_gpu.py sidecars (.json) of GPU runs, but got {run} ({got}); pass "
                    "benchmarks/results/advisor-single-gpu-RUN_h200x1_DATE.json")
    return None


def step_errors(bench, sidecar: dict, tmp: Path) -> dict[str, float]:
    """Per case, the step time's error (%) when ``sidecar`` (with its readings) is predicted again."""
    path = tmp / "run.json"
    path.write_text(json.dumps(sidecar))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = bench.main(["--repredict", str(path), "--host", "recorded"])
    if rc != 0:
        raise RuntimeError(f"--repredict of a rewritten sidecar exited {rc}")
    return {m["case"]: float(m["err"]) for m in map(_ERR.match, out.getvalue().splitlines()) if m}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", help="also write the report here")
    ap.add_argument("runs", nargs="+", help="advisor_single_gpu.py sidecars (.json) of GPU runs")
    args = ap.parse_args(argv)
    bad = bad_run(args.runs)
    if bad:
        print(f"advisor_host_rule: error: {bad}", file=sys.stderr)
        return 2
    import advisor_single_gpu as bench
    from gpucomm.advisor.compute import profile, source

    there = bench.host_times(profile.ProfileSource(source.shipped(source.SHIPPED["h200-nvswitch"])))
    lines: list[str] = []

    def say(line: str = "") -> None:
        lines.append(line)
        print(line, flush=True)

    say("# One host reading per family, or one for both? Each run's probe readings by five rules")
    say()
    say(f"command: python benchmarks/advisor_host_rule.py {' '.join(argv if argv is not None else sys.argv[1:])}")
    say(f"date: {_dt.date.today().isoformat()}; predicted on CPU with the shipped H200 profile; the rules: "
        "family (each family's own reading, shipped), geo (their geometric mean for both), gpt / llama (one "
        "family's for both), profile (x1)")
    say()
    say("| run | reading gpt / llama | " + " | ".join(f"{r} median / worst" for r in RULES) + " |")
    say("|---|---|" + "---:|" * len(RULES))
    best = dict.fromkeys(RULES, 0)
    worsts: dict[str, list[float]] = {r: [] for r in RULES}
    used = 0
    with tempfile.TemporaryDirectory() as tmp:
        for run in args.runs:
            readings = bench.read_host(run)
            if "gpt op" not in readings or "llama op" not in readings:
                say(f"| {Path(run).stem} | no readings of both families: left out | " + " | ".join("" for _ in RULES)
                    + " |")
                continue
            g, l = readings["gpt op"] / there["gpt op"], readings["llama op"] / there["llama op"]  # noqa: E741
            side = json.loads(Path(run).read_text())
            cells, worst = [], {}
            for rule, (rg, rl) in ratios_by_rule(g, l).items():
                side["host_here_s"] = {"gpt op": rg * there["gpt op"], "llama op": rl * there["llama op"]}
                errs = [abs(e) for e in step_errors(bench, side, Path(tmp)).values()]
                worst[rule] = max(errs)
                worsts[rule].append(max(errs))
                cells.append(f"{statistics.median(errs):.1f}% / {max(errs):.1f}%")
            low = min(worst.values())
            for rule in RULES:
                best[rule] += worst[rule] == low
            used += 1
            say(f"| {Path(run).stem.replace('advisor-single-gpu-', '')} | x{g:.2f} / x{l:.2f} | " + " | ".join(cells)
                + " |")
    say()
    if used:
        say(f"over {used} runs, the rule with the lowest worst |error| (ties count for each): "
            + ", ".join(f"{r} {best[r]}" for r in RULES))
        say("median over runs of the worst |error|: "
            + ", ".join(f"{r} {statistics.median(worsts[r]):.1f}%" for r in RULES))
    if args.out:
        Path(args.out).write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
