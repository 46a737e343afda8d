"""How well does ``gpucomm advise`` predict training steps that were actually measured?

Two forms:

* **CPU (default, CI-sized).**  Generates its own records on this machine, with ``OMP_NUM_THREADS=1``
  (one torch thread per process, so two DDP ranks do not oversubscribe two cores): one ``gpucomm bench``
  run (gloo, 2 processes: all_reduce, reduce_scatter, all_gather, 4 KiB-4 MiB), ``gpucomm train`` runs of
  ``single,replicated,ddp`` on 2 CPU devices for ``mlp`` (global batch 512, 2048) and ``gpt-tiny``
  (32, 64, 128), and ``single`` runs at the per-device batches DDP uses that those runs do not cover.
  All figures are CPU numbers.
* **Given records.**  ``--records DIR [DIR …]`` uses existing bench/train records instead (e.g. from
  the H200 machine).

Calibration set and held-out set (printed with the table): the calibration uses every bench row, every
``single`` row (compute per sample: the advisor always takes compute from measurement when it has one)
and the multi-device rows of one model (``--calibrate-model``; mlp in the CPU form), which fit the
per-device costs.  Every multi-device row of the other models is **held out**: predicted by the
calibrated model and compared with its measured step time (median of the timed steps, or ``--stat``).
Prints a Markdown table and the median and worst absolute relative error over the held-out rows
(target: median <= 10%).

Usage::

    python benchmarks/advisor_accuracy.py                       # CPU form, about 2-3 minutes on 2 cores
    python benchmarks/advisor_accuracy.py --records results/h200-bench results/h200-train
    python benchmarks/advisor_accuracy.py --save benchmarks/results/advisor-accuracy_cpu-gloo_2026-12-02.md
    python benchmarks/advisor_accuracy.py --max-median-error 0.10   # exit 1 above the target
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from gpucomm import records
from gpucomm.advisor import calibrate, plan

CPU_TRAIN = [("mlp", 512), ("mlp", 2048), ("gpt-tiny", 32), ("gpt-tiny", 64), ("gpt-tiny", 128)]
"""(model, global batch) of the single,replicated,ddp runs."""
CPU_SINGLE = [("mlp", 256), ("mlp", 1024), ("gpt-tiny", 16)]
"""Extra single-device runs, so that compute is measured at every per-device batch DDP uses (B/2)."""
BENCH_ARGS = ["--backends", "torch.distributed", "--ops", "all_reduce,reduce_scatter,all_gather", "--nproc", "2",
              "-b", "4K", "-e", "4M", "-f", "4", "-n", "20"]


def _gpucomm(args: list[str], timeout: int) -> None:
    cmd = [sys.executable, "-m", "gpucomm", *args]
    print("$ gpucomm " + " ".join(args), file=sys.stderr, flush=True)
    # One torch thread per process: 2 DDP ranks x 2 threads on 2 cores would oversubscribe them.  The env
    # block records it and calibration reads it (threads per device vs cores).
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=timeout,
                          env=env)
    if proc.returncode == 1:  # a strategy failed: its row says so (status "failed") and is not predicted
        print(f"  warning: exit 1, failed rows are skipped:\n{proc.stderr[-800:]}", file=sys.stderr)
    elif proc.returncode != 0:
        raise SystemExit(f"gpucomm {' '.join(args)} failed with exit {proc.returncode}:\n{proc.stderr[-2000:]}")


def generate_cpu_records(root: Path, steps: int) -> list[Path]:
    """Run the CPU bench and train commands; returns their result directories."""
    dirs = [root / "bench"]
    _gpucomm(["bench", *BENCH_ARGS, "--out", str(dirs[0])], timeout=300)
    runs = [("single,replicated,ddp", m, b) for m, b in CPU_TRAIN] + [("single", m, b) for m, b in CPU_SINGLE]
    for strategies, model, batch in runs:
        d = root / f"train-{model}-{batch}-{strategies.count(',') + 1}"
        _gpucomm(["train", "--strategies", strategies, "--model", model, "--steps", str(steps),
                  "--warmup-steps", "5", "--global-batch", str(batch), "--devices", "cpu,cpu", "--nproc", "2",
                  "--out", str(d), "--no-report"], timeout=300)
        dirs.append(d)
    return dirs


def restat(results: records.ResultSet, stat: str) -> records.ResultSet:
    """``results`` with each train row's ``step_ms_median`` replaced by ``stat`` of its timed steps.

    "median" keeps the records as they are.  "p25"/"min" exist for shared machines: the model predicts an
    uncontended step, and on a 2-core machine shared with other jobs the median mixes in steps that waited
    for a core.  Calibration and comparison always use the same statistic.
    """
    if stat == "median":
        return results
    out = []
    for r in results.train:
        steps = sorted(r.step_ms[r.warmup_steps:] or r.step_ms)
        if steps:
            value = steps[0] if stat == "min" else steps[(len(steps) - 1) // 4]
            r = dataclasses.replace(r, step_ms_median=value)
        out.append(r)
    return records.ResultSet(env=results.env, bench=results.bench, train=out, sources=results.sources)


def split(results: records.ResultSet, calibrate_model: str | None = None
          ) -> tuple[records.ResultSet, list[records.TrainRecord]]:
    """(calibration set, held-out rows) by the rule in the module docstring."""
    multi = [r for r in results.train if r.strategy != "single" and r.status == "ok" and r.step_ms_median]
    if not multi:
        raise SystemExit("no multi-device train rows with status ok to predict")
    first = calibrate_model or min(r.model for r in multi)
    calib_rows = [r for r in multi if r.model == first]
    held = [r for r in multi if r.model != first]
    if not held:
        raise SystemExit(f"every multi-device row is of model {first!r}: nothing left to hold out")
    cal = records.ResultSet(env=results.env, bench=results.bench, sources=results.sources,
                            train=[r for r in results.train if r.strategy == "single"] + calib_rows)
    return cal, held


def _nodes(r: records.TrainRecord, per_node: int) -> tuple[int, int]:
    g = min(r.n_devices, per_node)
    return g, max(1, -(-r.n_devices // g))


def evaluate(results: records.ResultSet, calibrate_model: str | None = None
             ) -> tuple[list[dict], records.ResultSet]:
    """Calibrate on the calibration set and predict every held-out row."""
    cal, held = split(results, calibrate_model)
    profile = calibrate.calibrate(cal, label="advisor-accuracy")
    rows = []
    for r in held:
        wl = plan.workload_from_record(r)
        g, m = _nodes(r, profile.max_gpus_per_node)
        pred = plan.predict(r.strategy, profile, wl, gpus_per_node=g, nodes=m)
        rows.append({"strategy": r.strategy, "model": r.model, "n": r.n_devices, "batch": r.global_batch,
                     "measured_ms": r.step_ms_median, "predicted_ms": pred.step_time_s * 1e3,
                     "p90_ms": r.step_ms_p90, "error": pred.step_time_s * 1e3 / r.step_ms_median - 1,
                     "comm_ms": r.comm_ms_median, "pred_comm_ms": pred.comm_s * 1e3})
    return rows, cal


def _fmt(x: float | None, digits: int = 2) -> str:
    return "—" if x is None else f"{x:.{digits}f}"


def _load() -> str:
    try:
        return "load average {:.1f} / {:.1f} / {:.1f} (1 / 5 / 15 min)".format(*os.getloadavg())
    except OSError:
        return "load average unknown"


def render(rows: list[dict], cal: records.ResultSet, device: str, commands: list[str],
           load: tuple[str, str] = ("", "")) -> str:
    """The Markdown result: what was calibrated on, the held-out table, median and worst error."""
    errs = [abs(r["error"]) for r in rows]
    cal_rows = sorted({(r.strategy, r.model, r.n_devices, r.global_batch) for r in cal.train})
    lines = [f"# advisor accuracy — {device}", "",
             f"Generated {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC by `benchmarks/advisor_accuracy.py`.",
             f"All times are {device} numbers: median step time over the timed steps.",
             f"Machine load when the records were taken: at the start {load[0]}; at the end {load[1]}.", "",
             "Records: " + (", ".join(f"`{c}`" for c in commands) if commands else "given with --records"), "",
             f"Calibrated on: {len(cal.bench)} bench rows, and train rows "
             + ", ".join(f"{s} {m} n={n} B={b}" for s, m, n, b in cal_rows) + ".", "",
             "Held out (predicted, then compared):", "",
             "| strategy | model | devices | global batch | measured ms | p90 ms | predicted ms | error | "
             "measured comm ms | predicted comm ms |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['strategy']} | {r['model']} | {r['n']} | {r['batch']} | {_fmt(r['measured_ms'])} | "
                     f"{_fmt(r['p90_ms'])} | {_fmt(r['predicted_ms'])} | {r['error']:+.1%} | {_fmt(r['comm_ms'])} | "
                     f"{_fmt(r['pred_comm_ms'])} |")
    lines += ["", f"**Median absolute error {statistics.median(errs):.1%}; worst {max(errs):.1%}** "
                  f"over {len(errs)} held-out rows (target: median <= 10%)."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", nargs="+", help="use these result directories instead of generating CPU ones")
    parser.add_argument("--steps", type=int, default=25, help="train steps per strategy in the CPU form")
    parser.add_argument("--work-dir", help="keep generated records here (default: a temporary directory)")
    parser.add_argument("--save", help="write the Markdown table to this file")
    parser.add_argument("--calibrate-model", help="model whose multi-device rows calibrate (default: mlp in the "
                                                  "CPU form, else the first by name); the others are held out")
    parser.add_argument("--stat", default="median", choices=("median", "p25", "min"),
                        help="step-time statistic for calibration and comparison (default median)")
    parser.add_argument("--max-median-error", type=float, help="exit 1 when the median error exceeds this")
    args = parser.parse_args(argv)
    commands: list[str] = []
    load_start = _load()
    with tempfile.TemporaryDirectory(prefix="gpucomm-accuracy-") as tmp:
        if args.records:
            dirs = [Path(d) for d in args.records]
        else:
            root = Path(args.work_dir or tmp)
            dirs = generate_cpu_records(root, args.steps)
            commands = ["OMP_NUM_THREADS=1 gpucomm bench " + " ".join(BENCH_ARGS)] + [
                f"OMP_NUM_THREADS=1 gpucomm train --strategies {st} --model {m} --steps {args.steps} "
                f"--global-batch {b} --devices cpu,cpu --nproc 2"
                for st, rows in (("single,replicated,ddp", CPU_TRAIN), ("single", CPU_SINGLE)) for m, b in rows]
        results = records.load(*dirs)
        results = restat(results, args.stat)
        rows, cal = evaluate(results, args.calibrate_model or (None if args.records else "mlp"))
    device = "CPU (gloo)" if all(e.device_type == "cpu" for e in results.env) else "GPU"
    text = render(rows, cal, f"{device}, {os.cpu_count()} cores" if device.startswith("CPU") else device,
                  commands, (load_start, _load()))
    print(text)
    if args.save:
        Path(args.save).parent.mkdir(parents=True, exist_ok=True)
        Path(args.save).write_text(text, encoding="utf-8")
    median = statistics.median(abs(r["error"]) for r in rows)
    return 1 if args.max_median_error is not None and median > args.max_median_error else 0


if __name__ == "__main__":
    raise SystemExit(main())
