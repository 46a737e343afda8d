"""How well does ``gpucomm advise`` predict training steps that were actually measured?

Two forms:

* **CPU (default, CI-sized).**  Generates its own records on this machine, with ``OMP_NUM_THREADS=1``
  for every process (one torch thread per process, so two DDP ranks do not oversubscribe two cores; the
  env block records it and calibration reads it): one ``gpucomm bench`` run (gloo, 2 processes:
  all_reduce, reduce_scatter, all_gather, 4 KiB-4 MiB), ``gpucomm train`` runs of
  ``single,replicated,ddp`` on 2 CPU devices for ``gpt-tiny`` (global batch 32, 64, 128), and ``single`` runs at
  the per-device batches DDP uses that those runs do not cover.
  The train runs are repeated ``--repeats`` times (default 3), **interleaved**: round r runs every
  configuration once before round r+1 starts, so a burst of load on the shared machine hits
  calibration and held-out rows alike instead of one configuration.  All figures are CPU numbers.
* **Given records.**  ``--records DIR [DIR …]`` uses existing bench/train records instead (e.g. from
  the H200 machine).  Directories holding the same configuration are repeats of it.

Repeats and noise.  Rows of one configuration (strategy, model, devices, global batch) are merged: the
step time is the median over the repeats of each repeat's step statistic (``--stat``).  The **A/A
noise** is the same configuration measured twice: ``|t1 - t2| / mean(t1, t2)`` of its first two repeats,
printed per held-out row and summarised (median and worst over every repeated configuration), so a
reader can tell model error from machine noise.

Calibration set and held-out set (printed with the table):

* CPU form: :data:`CPU_CALIBRATE_ON` — every bench and ``single`` row and the runs at batch 32 and 128
  calibrate; the multi-device runs at batch 64 are **held out**;
* ``--records`` without patterns: every bench row, every ``single`` row and the multi-device rows of one model
  (``--calibrate-model``, else the first by name) calibrate; every multi-device row of the other models is
  **held out**;
* ``--calibrate-on PATTERN …``: exactly the train rows matching a pattern ``strategy:model[:batch[:devices]]``
  (``*`` matches anything) calibrate, with every bench row; **every other row is held out**, ``single``
  rows included (each predicted as its preset layout).  This is the one-GPU form::

      --calibrate-on single:gpt-124m:8 single:gpt-124m:16

  holds out single gpt-124m at 32 (extrapolated compute), ddp at world size 1 (DDP's own overhead) and every
  gpt-350m row (the datasheet model with the GEMM efficiency calibrated on gpt-124m's steps).

Each held-out row is predicted by the calibrated model and compared with its measured step time.
Prints a Markdown table and the median and worst absolute relative error over the held-out rows
(target: median <= 10%).

Usage::

    python benchmarks/advisor_accuracy.py                       # CPU form, about 6-8 minutes on 2 cores
    python benchmarks/advisor_accuracy.py --records results/h200-a results/h200-b \
        --calibrate-on single:gpt-124m:8 single:gpt-124m:16
    python benchmarks/advisor_accuracy.py --save benchmarks/results/advisor-accuracy_cpu-gloo_2026-12-02.md
    python benchmarks/advisor_accuracy.py --max-median-error 0.10   # exit 1 above the target
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import fnmatch
import os
import statistics
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

from gpucomm import records
from gpucomm.advisor import calibrate, search

CPU_TRAIN = [("gpt-tiny", 32), ("gpt-tiny", 64), ("gpt-tiny", 128)]
"""(model, global batch) of the single,replicated,ddp runs (the advisor models transformers: gpt-tiny is the one
that trains in seconds on a CPU)."""
CPU_SINGLE = [("gpt-tiny", 16)]
"""Extra single-device runs, so that compute is measured at every per-device batch DDP uses (B/2)."""
CPU_CALIBRATE_ON = ["single:gpt-tiny", "*:gpt-tiny:32", "*:gpt-tiny:128"]
"""The CPU form's calibration set: every single row and the runs at batch 32 and 128; batch 64 is held out."""
BENCH_ARGS = ["--backends", "torch.distributed", "--ops", "all_reduce,reduce_scatter,all_gather", "--nproc", "2",
              "-b", "4K", "-e", "4M", "-f", "4", "-n", "20"]
THREADS = "1"
"""``OMP_NUM_THREADS`` of every generated run: 2 DDP ranks x 2 threads on 2 cores would oversubscribe them."""


def _gpucomm(args: list[str], timeout: int) -> None:
    cmd = [sys.executable, "-m", "gpucomm", *args]
    print("$ gpucomm " + " ".join(args), file=sys.stderr, flush=True)
    env = {**os.environ, "OMP_NUM_THREADS": THREADS}
    proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=timeout,
                          env=env)
    if proc.returncode == 1:  # a strategy failed: its row says so (status "failed") and is not predicted
        print(f"  warning: exit 1, failed rows are skipped:\n{proc.stderr[-800:]}", file=sys.stderr)
    elif proc.returncode != 0:
        raise SystemExit(f"gpucomm {' '.join(args)} failed with exit {proc.returncode}:\n{proc.stderr[-2000:]}")


def _train_runs() -> list[tuple[str, str, int]]:
    return [("single,replicated,ddp", m, b) for m, b in CPU_TRAIN] + [("single", m, b) for m, b in CPU_SINGLE]


def generate_cpu_records(root: Path, steps: int, repeats: int) -> list[Path]:
    """Run the CPU bench once and the train commands ``repeats`` times, interleaved; returns the dirs."""
    dirs = [root / "bench"]
    _gpucomm(["bench", *BENCH_ARGS, "--out", str(dirs[0])], timeout=300)
    for rep in range(repeats):
        for strategies, model, batch in _train_runs():
            d = root / f"r{rep}-train-{model}-{batch}-{strategies.count(',') + 1}"
            _gpucomm(["train", "--strategies", strategies, "--model", model, "--steps", str(steps),
                      "--warmup-steps", "5", "--global-batch", str(batch), "--devices", "cpu,cpu", "--nproc", "2",
                      "--out", str(d), "--no-report"], timeout=300)
            dirs.append(d)
    return dirs


def _stat(r: records.TrainRecord, stat: str) -> float:
    """``stat`` of a row's timed steps ("median" is the recorded median)."""
    steps = sorted(r.step_ms[r.warmup_steps:] or r.step_ms)
    if stat == "median" or not steps:
        return r.step_ms_median
    return steps[0] if stat == "min" else steps[(len(steps) - 1) // 4]


def _key(r: records.TrainRecord) -> tuple[str, str, int, int]:
    return (r.strategy, r.model, r.n_devices, r.global_batch)


def aa_noise(values: list[float]) -> float | None:
    """A/A noise of one configuration: ``|t1 - t2| / mean(t1, t2)`` of its first two repeats; None if once."""
    if len(values) < 2:
        return None
    a, b = values[0], values[1]
    return abs(a - b) / ((a + b) / 2)


def merge_repeats(results: records.ResultSet, stat: str = "median"
                  ) -> tuple[records.ResultSet, dict[tuple, list[float]]]:
    """One train row per configuration (median over repeats of ``stat``), and every repeat's value.

    The merged row is the first repeat's record with ``step_ms_median`` (and ``step_ms_p90``,
    ``comm_ms_median``) replaced by the median over repeats; calibration and comparison both use it.
    Rows that did not run ("failed", no step time) are dropped.
    """
    groups: dict[tuple, list[records.TrainRecord]] = defaultdict(list)
    for r in results.train:
        if r.status == "ok" and r.step_ms_median:
            groups[_key(r)].append(r)
    merged, values = [], {}
    for key, rows in groups.items():
        vals = [_stat(r, stat) for r in rows]
        values[key] = vals
        p90 = [r.step_ms_p90 for r in rows if r.step_ms_p90]
        comm = [r.comm_ms_median for r in rows if r.comm_ms_median]
        merged.append(dataclasses.replace(rows[0], step_ms_median=statistics.median(vals),
                                          step_ms_p90=statistics.median(p90) if p90 else None,
                                          comm_ms_median=statistics.median(comm) if comm else None))
    out = records.ResultSet(env=results.env, bench=results.bench, train=merged, sources=results.sources)
    return out, values


def _matches(r: records.TrainRecord, pattern: str) -> bool:
    parts = pattern.split(":")
    if not 2 <= len(parts) <= 4:
        raise SystemExit(f"--calibrate-on {pattern!r}: expected strategy:model[:batch[:devices]], e.g. "
                         f"single:gpt-124m:8")
    fields = (r.strategy, r.model, str(r.global_batch), str(r.n_devices))[: len(parts)]
    return all(fnmatch.fnmatchcase(f, p) for f, p in zip(fields, parts, strict=True))


def split(results: records.ResultSet, calibrate_model: str | None = None,
          calibrate_on: list[str] | None = None) -> tuple[records.ResultSet, list[records.TrainRecord]]:
    """(calibration set, held-out rows) by the rules in the module docstring."""
    ok = [r for r in results.train if r.status == "ok" and r.step_ms_median]
    if calibrate_on:
        calib_rows = [r for r in ok if any(_matches(r, p) for p in calibrate_on)]
        held = [r for r in ok if r not in calib_rows]
        if not calib_rows:
            raise SystemExit(f"--calibrate-on {' '.join(calibrate_on)}: matches no train row")
    else:
        multi = [r for r in ok if r.strategy != "single"]
        if not multi:
            raise SystemExit("no multi-device train rows with status ok to predict; pass --calibrate-on to hold "
                             "out single rows instead")
        first = calibrate_model or min(r.model for r in multi)
        calib_rows = [r for r in ok if r.strategy == "single"] + [r for r in multi if r.model == first]
        held = [r for r in multi if r.model != first]
    if not held:
        raise SystemExit("every train row is in the calibration set: nothing left to hold out")
    cal = records.ResultSet(env=results.env, bench=results.bench, sources=results.sources, train=calib_rows)
    return cal, held


def _predict(r: records.TrainRecord, profile) -> tuple[float, float]:
    """(predicted step s, predicted communication s) of row ``r``: its preset layout, priced by the planner."""
    made = calibrate.job_for_record(profile, r)
    if made is None:
        raise SystemExit(f"train row {r.strategy} {r.model}: not a model or strategy the advisor prices")
    t = search.evaluate(*made).time
    return t.step_s, t.comm_s


def evaluate(results: records.ResultSet, calibrate_model: str | None = None, calibrate_on: list[str] | None = None,
             values: dict[tuple, list[float]] | None = None) -> tuple[list[dict], records.ResultSet]:
    """Calibrate on the calibration set and predict every held-out row (``results`` already merged)."""
    cal, held = split(results, calibrate_model, calibrate_on)
    profile = calibrate.calibrate(cal, label="advisor-accuracy")
    rows = []
    for r in sorted(held, key=lambda r: (r.model, r.global_batch, r.n_devices, r.strategy)):
        step, comm = _predict(r, profile)
        reps = (values or {}).get(_key(r), [r.step_ms_median])
        rows.append({"strategy": r.strategy, "model": r.model, "n": r.n_devices, "batch": r.global_batch,
                     "measured_ms": r.step_ms_median, "predicted_ms": step * 1e3, "p90_ms": r.step_ms_p90,
                     "error": step * 1e3 / r.step_ms_median - 1, "comm_ms": r.comm_ms_median,
                     "pred_comm_ms": comm * 1e3, "repeats": reps, "aa": aa_noise(reps)})
    return rows, cal


def _fmt(x: float | None, digits: int = 2) -> str:
    return "—" if x is None else f"{x:.{digits}f}"


def _load() -> str:
    try:
        return "load average {:.1f} / {:.1f} / {:.1f} (1 / 5 / 15 min)".format(*os.getloadavg())
    except OSError:
        return "load average unknown"


def noise_summary(values: dict[tuple, list[float]]) -> str:
    """One sentence: median and worst A/A noise over the repeated configurations."""
    aa = [x for x in (aa_noise(v) for v in values.values()) if x is not None]
    if not aa:
        return "A/A noise: not measured (every configuration ran once)"
    return (f"A/A noise (same configuration measured twice, |t1 - t2| / mean): median {statistics.median(aa):.1%}, "
            f"worst {max(aa):.1%} over {len(aa)} configuration{'s' if len(aa) > 1 else ''}")


def render(rows: list[dict], cal: records.ResultSet, device: str, commands: list[str],
           load: tuple[str, str] = ("", ""), values: dict[tuple, list[float]] | None = None,
           stat: str = "median") -> str:
    """The Markdown result: what was calibrated on, the held-out table, error beside A/A noise."""
    errs = [abs(r["error"]) for r in rows]
    cal_rows = sorted({_key(r) for r in cal.train})
    reps = max((len(v) for v in (values or {}).values()), default=1)
    lines = [f"# advisor accuracy — {device}", "",
             f"Generated {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC by `benchmarks/advisor_accuracy.py`.",
             f"All times are {device} numbers: per run the {stat} step time over the timed steps, then the median "
             f"over up to {reps} repeats of each configuration.",
             f"Machine load when the records were taken: at the start {load[0]}; at the end {load[1]}.", "",
             "Records: " + (", ".join(f"`{c}`" for c in commands) if commands else "given with --records"), "",
             f"Calibrated on: {len(cal.bench)} bench rows, and train rows "
             + ", ".join(f"{s} {m} n={n} B={b}" for s, m, n, b in cal_rows) + ".", "",
             "Held out (predicted, then compared):", "",
             "| strategy | model | devices | global batch | measured ms | repeats ms | A/A noise | predicted ms | error | "
             "measured comm ms | predicted comm ms |",
             "|---|---|---:|---:|---:|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        aa = "—" if r["aa"] is None else f"{r['aa']:.1%}"
        lines.append(f"| {r['strategy']} | {r['model']} | {r['n']} | {r['batch']} | {_fmt(r['measured_ms'])} | "
                     f"{' / '.join(f'{v:.1f}' for v in r['repeats'])} | {aa} | {_fmt(r['predicted_ms'])} | "
                     f"{r['error']:+.1%} | {_fmt(r['comm_ms'])} | {_fmt(r['pred_comm_ms'])} |")
    lines += ["", f"**Median absolute error {statistics.median(errs):.1%}; worst {max(errs):.1%}** "
                  f"over {len(errs)} held-out rows (target: median <= 10%).", "",
              noise_summary(values or {}) + "."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", nargs="+", help="use these result directories instead of generating CPU ones")
    parser.add_argument("--steps", type=int, default=25, help="train steps per strategy in the CPU form")
    parser.add_argument("--repeats", type=int, default=3, help="interleaved repeats of the CPU train runs (default 3)")
    parser.add_argument("--work-dir", help="keep generated records here (default: a temporary directory)")
    parser.add_argument("--save", help="write the Markdown table to this file")
    parser.add_argument("--calibrate-model", help="model whose multi-device rows calibrate (default with --records: "
                                                  "the first by name); the others are held out")
    parser.add_argument("--calibrate-on", nargs="+", metavar="PATTERN",
                        help="calibrate on exactly the train rows matching strategy:model[:batch[:devices]] "
                             "('*' matches anything); hold out every other row, single rows included")
    parser.add_argument("--stat", default="median", choices=("median", "p25", "min"),
                        help="per-run step-time statistic for calibration and comparison (default median)")
    parser.add_argument("--max-median-error", type=float, help="exit 1 when the median error exceeds this")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error(f"--repeats: expected >= 1, but got {args.repeats}")
    commands: list[str] = []
    load_start = _load()
    with tempfile.TemporaryDirectory(prefix="gpucomm-accuracy-") as tmp:
        if args.records:
            dirs = [Path(d) for d in args.records]
        else:
            root = Path(args.work_dir or tmp)
            dirs = generate_cpu_records(root, args.steps, args.repeats)
            commands = [f"OMP_NUM_THREADS={THREADS} gpucomm bench " + " ".join(BENCH_ARGS)] + [
                f"OMP_NUM_THREADS={THREADS} gpucomm train --strategies {st} --model {m} --steps {args.steps} "
                f"--global-batch {b} --devices cpu,cpu --nproc 2" for st, m, b in _train_runs()]
            if args.repeats > 1:
                commands.append(f"(the train commands {args.repeats} times, interleaved)")
        results, values = merge_repeats(records.load(*dirs), args.stat)
        calibrate_on = args.calibrate_on or (None if args.records or args.calibrate_model else CPU_CALIBRATE_ON)
        rows, cal = evaluate(results, args.calibrate_model, calibrate_on, values)
    device = "CPU (gloo)" if all(e.device_type == "cpu" for e in results.env) else "GPU"
    text = render(rows, cal, f"{device}, {os.cpu_count()} cores" if device.startswith("CPU") else device,
                  commands, (load_start, _load()), values, args.stat)
    print(text)
    if args.save:
        Path(args.save).parent.mkdir(parents=True, exist_ok=True)
        Path(args.save).write_text(text, encoding="utf-8")
    median = statistics.median(abs(r["error"]) for r in rows)
    return 1 if args.max_median_error is not None and median > args.max_median_error else 0


if __name__ == "__main__":
    raise SystemExit(main())
