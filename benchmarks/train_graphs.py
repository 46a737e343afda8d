"""Host time against GPU time per replica-step, eager vs CUDA graphs, for ``single`` and ``replicated``.

Question: can one Python process feed many GPUs?  Only if the host time it spends per replica-step is a
small fraction of that replica's GPU time (target with graphs: host <= 1/32 of GPU, all-reduces
included).  Usage::

    python benchmarks/train_graphs.py                                   # H200: GPT-124M, 16x1024 per replica
    python benchmarks/train_graphs.py --device cpu --model gpt-tiny     # CPU smoke form (eager only)

Method (one process; for every form the eager and the graphed strategy are built side by side and
run in alternating blocks of steps, the order flipped every block):

* **forms**: ``single`` (1 replica) and ``replicated`` with 2 and 4 replicas on the repeated device
  (``cuda:0`` x n: one GPU is what there is, so per-replica figures are what matter), replicas run
  one after another in the calling thread (no replica threads: their GIL waits would blur the host
  figure, and on one GPU threads buy nothing);
* **host time** of a step: the device is synchronised, then the host clock runs around
  ``strategy.step()`` alone.  The step itself never synchronises, but with every replica on ONE GPU
  its own launches can fill that GPU's launch queue (four GPT-124M forward+backward graphs did, on the
  H200: the fourth replay waited for the first to drain), and then the clock counts *waiting*, which on
  n distinct GPUs (one queue each, holding one replica's work) would not happen;
* **launch time** of a step (CUDA), on other steps: the same clock around ``step()``, but the device is
  synchronised before every host phase the strategy reports (each replica's graph replay, the
  all-reduce, each replica's optimizer replay; for eager steps forward, backward, ...) and the time
  spent in those inserted synchronisations is subtracted.  Every phase therefore starts from an idle
  queue, as each replica's launches would on its own GPU, and what remains is the Python and launch
  cost of the whole step (the code between phases included).  How we know it measures launching: a
  phase that starts from an empty queue can only block if that phase alone holds more work than the
  queue (one replica's graph does not: ``single`` launches its whole step in one replay at ~0.5 ms);
  ``host - launch`` is the waiting, shown in the notes.  The target (host <= 1/32 of GPU time per
  replica-step) is judged on launch time; the whole-step host figure is printed next to it;
* **GPU time** of a step, on other steps: the device is synchronised, a sleep kernel longer than the
  host's enqueue time is queued first (``torch.cuda._sleep``), and CUDA events bracket the step, so
  the device never idles waiting for the host and the events measure the step's execution;
* the step's all-reduces are part of both figures (they are issued inside ``step()``);
* per replica-step = per step / replicas; the figure is the median over the timed steps; the phases
  in the notes come from the launch-timed steps (CUDA) or the host-timed ones (CPU);
* losses: graphed vs eager of the same form, and every replicated run vs eager ``single`` on the
  same global batch (run untimed before the form), step by step, within the precision's tolerance
  (bf16 autocast 3e-2, fp32 1e-5); replicas must be bit-identical.

Writes ``train-graphs_<hardware>_<date>.txt`` (the table, the command, the environment) and
``.jsonl`` (one JSON object per row, flushed as it is made) to ``--out`` (default ``$OUT``, else
``benchmarks/results``).  Stops starting new forms after ``--time-limit`` seconds and says so.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import gc
import json
import os
import platform
import shlex
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch

from gpucomm.parallel import graphs
from gpucomm.train.config import TOLERANCES, TrainConfig
from gpucomm.train.models import load_workload
from gpucomm.train.strategies import ReplicatedStrategy, SingleStrategy
from gpucomm.train.strategies.base import pin

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the shared clock beside this script, also when imported
from _clock import SleepClock

TARGET = 1 / 32


def _args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda" if torch.cuda.is_available() else "cpu",
                   help="device type; every replica goes on device 0 of it (default: cuda when available)")
    p.add_argument("--model", default=None, help="built-in model (default: gpt-124m on cuda, gpt-tiny on cpu)")
    p.add_argument("--batch", type=int, default=None, help="samples per replica (default: 16 on cuda, 4 on cpu)")
    p.add_argument("--replicas", default="2,4", help="replica counts for replicated (default 2,4)")
    p.add_argument("--blocks", type=int, default=4, help="alternating blocks per mode (default 4)")
    p.add_argument("--block-steps", type=int, default=6, help="steps per block; half host-timed, half GPU-timed")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps per strategy first (default 3)")
    p.add_argument("--time-limit", type=float, default=150.0, help="start no new form after this many seconds")
    p.add_argument("--hardware", default=None, help="hardware label in the file name (default: from the device)")
    p.add_argument("--out", type=Path, default=None, help="output directory (default: $OUT, else benchmarks/results)")
    args = p.parse_args(argv)
    for name in ("batch", "blocks", "block_steps"):
        value = getattr(args, name)
        if value is not None and value < 1:
            p.error(f"--{name.replace('_', '-')}: expected an integer >= 1, but got {value}")
    if args.device == "cuda" and not torch.cuda.is_available():
        p.error("--device cuda: CUDA is not available here; use --device cpu (eager timing only)")
    if args.warmup < 0:
        p.error(f"--warmup: expected an integer >= 0, but got {args.warmup}")
    try:
        args.replicas = [int(v) for v in args.replicas.split(",") if v.strip()]
    except ValueError:
        p.error(f"--replicas: expected comma-separated integers >= 2, but got {args.replicas!r}")
    if any(n < 2 for n in args.replicas):
        p.error(f"--replicas: expected integers >= 2, but got {args.replicas}")
    args.model = args.model or ("gpt-124m" if args.device == "cuda" else "gpt-tiny")
    args.batch = args.batch or (16 if args.device == "cuda" else 4)
    return args


def _hardware(device: str) -> str:
    if device == "cpu":
        return "cpu"
    name = torch.cuda.get_device_name(0)
    short = "h200" if "H200" in name else "".join(c for c in name.lower() if c.isalnum())[:16]
    return f"{short}x{torch.cuda.device_count()}"


class _Timer(SleepClock):
    """Host-timed, launch-timed and GPU-timed steps of one strategy (see the module notes)."""

    def __init__(self, device: str) -> None:
        super().__init__(device == "cuda")

    def host(self, strategy: Any, s: int, batch: Any) -> tuple[float, Any, dict[str, float]]:
        self.sync()
        strategy.take_host_phases()
        t0 = time.perf_counter()
        result = strategy.step(s, batch)
        host = (time.perf_counter() - t0) * 1e3
        phases = {k: v * 1e3 for k, v in strategy.take_host_phases().items()}
        self.sync()
        getattr(strategy, "take_comm_ms", lambda: None)()  # drop the step's comm events
        return host, result.loss, phases

    def launch(self, strategy: Any, s: int, batch: Any) -> tuple[float, Any, dict[str, float]]:
        """The step's host time with the device synchronised before every host phase, minus those syncs."""
        self.sync()
        strategy.take_host_phases()
        waited = 0.0
        phases: dict[str, float] = {}

        @contextlib.contextmanager
        def from_idle(name: str):
            # timed here, not by the strategy's own phase timer, so that syncs made inside a nested phase
            # (eager: the all-reduce hooks inside backward) are not counted in the outer phase either
            nonlocal waited
            t = time.perf_counter()
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            waited += t0 - t
            before = waited
            try:
                yield
            finally:
                dt = time.perf_counter() - t0 - (waited - before)
                phases[name] = phases.get(name, 0.0) + dt * 1e3

        strategy.host_phase = from_idle  # an instance attribute: the class's method is untouched
        try:
            t0 = time.perf_counter()
            result = strategy.step(s, batch)
            launch = (time.perf_counter() - t0 - waited) * 1e3
        finally:
            del strategy.host_phase
        strategy.take_host_phases()
        self.sync()
        getattr(strategy, "take_comm_ms", lambda: None)()
        return launch, result.loss, phases

    def gpu(self, strategy: Any, s: int, batch: Any, host_ms: float) -> tuple[float, Any, float | None]:
        gpu, result = self.behind_sleep(lambda: strategy.step(s, batch), host_ms)
        strategy.take_host_phases()
        comm = getattr(strategy, "take_comm_ms", lambda: None)()  # replicated: its all-reduces' GPU time
        return gpu, result.loss, (comm[-1] if comm else None)


def _config(args: argparse.Namespace, replicas: int, graphed: bool, steps: int) -> TrainConfig:
    return TrainConfig(strategies=("single", "replicated"), model=args.model, steps=steps, warmup_steps=0,
                       global_batch=args.batch * replicas, devices=[f"{args.device}:0" if args.device == "cuda"
                                                                    else "cpu"] * replicas,
                       graphs=graphed, replicated_threads=False)


class _Run:
    """One strategy (a form in one mode) and what its steps measured."""

    def __init__(self, cls: type, cfg: TrainConfig, workload: Any, mode: str) -> None:
        self.mode, self.cfg = mode, cfg
        self.strategy = cls(cfg, cls.devices_needed(cfg))
        self.strategy.prepare(workload)
        self.losses: list[Any] = []
        self.host_ms: list[float] = []
        self.launch_ms: list[float] = []
        self.gpu_ms: list[float] = []
        self.phases: list[dict[str, float]] = []  # of launch-timed steps on CUDA, host-timed ones on CPU
        self.comm_ms: list[float] = []


def _batches(workload: Any, cfg: TrainConfig, cuda: bool) -> list[Any]:
    return [pin(workload.batch_fn(cfg.seed, s, cfg.global_batch)) if cuda
            else workload.batch_fn(cfg.seed, s, cfg.global_batch) for s in range(cfg.steps)]


def _rel(a: float, b: float) -> float:
    return abs(a - b) / max(abs(b), 1e-12)


def _max_rel(a: list[float], b: list[float]) -> float:
    return max((_rel(x, y) for x, y in zip(a, b, strict=True)), default=0.0)


def _single_reference(args, replicas: int, steps: int, workload: Any) -> list[float] | str:
    """Eager ``single``'s losses on the same global batch (untimed), or why there are none."""
    cfg = _config(args, replicas, False, steps)
    cfg.devices = cfg.devices[:1]
    strategy = SingleStrategy(cfg, cfg.devices)
    try:
        strategy.prepare(workload)
        batches = _batches(workload, cfg, args.device == "cuda")
        losses = [float(strategy.step(s, batches[s]).loss) for s in range(steps)]
    except torch.cuda.OutOfMemoryError as exc:
        return f"single on {cfg.global_batch} samples does not fit: {str(exc).splitlines()[0]}"
    finally:
        strategy.teardown()
        del strategy
        gc.collect()
        if args.device == "cuda":
            torch.cuda.empty_cache()
    return losses


def _measure_form(args, name: str, replicas: int, timer: _Timer) -> list[dict]:
    """Eager and graphed runs of one form, interleaved; returns one row per mode."""
    cuda = args.device == "cuda"
    steps = args.warmup + args.blocks * args.block_steps
    cls = SingleStrategy if name == "single" else ReplicatedStrategy
    workload = load_workload(args.model)
    reference = _single_reference(args, replicas, steps, workload) if name != "single" else None
    modes = ["eager"]
    unavailable = graphs.unavailable([torch.device(f"{args.device}:0" if cuda else "cpu")])
    rows: dict[str, dict] = {}
    runs: dict[str, _Run] = {}
    if unavailable is None:
        modes.append("graphs")
    else:
        rows["graphs"] = {"status": "unavailable", "reason": unavailable}
    batches = _batches(workload, _config(args, replicas, False, steps), cuda)
    for mode in modes:
        try:
            if cuda:
                torch.cuda.reset_peak_memory_stats()
            runs[mode] = _Run(cls, _config(args, replicas, mode == "graphs", steps), workload, mode)
        except (graphs.GraphCaptureError, torch.cuda.OutOfMemoryError) as exc:
            rows[mode] = {"status": "failed", "reason": str(exc).splitlines()[0]}
    for s in range(args.warmup):
        for run in runs.values():
            run.losses.append(run.strategy.step(s, batches[s]).loss)
    order = list(runs)
    for block in range(args.blocks):
        for mode in (order if block % 2 == 0 else order[::-1]):
            run = runs[mode]
            for i in range(args.block_steps):
                s = args.warmup + block * args.block_steps + i
                if not cuda or i % 3 == 0:
                    host, loss, phases = timer.host(run.strategy, s, batches[s])
                    run.host_ms.append(host)
                    if not cuda:
                        run.phases.append(phases)
                elif i % 3 == 2:
                    launch, loss, phases = timer.launch(run.strategy, s, batches[s])
                    run.launch_ms.append(launch)
                    run.phases.append(phases)
                else:
                    prior = statistics.median(run.host_ms) if run.host_ms else 50.0
                    gpu, loss, comm = timer.gpu(run.strategy, s, batches[s], prior)
                    run.gpu_ms.append(gpu)
                    if comm is not None:
                        run.comm_ms.append(comm)
                run.losses.append(loss)
    timer.sync()
    for mode, run in runs.items():
        losses = [float(v) for v in run.losses]
        precision = run.strategy.precision
        tol = TOLERANCES[precision]
        host = statistics.median(run.host_ms) / replicas
        launch = statistics.median(run.launch_ms) / replicas if run.launch_ms else None
        gpu = statistics.median(run.gpu_ms) / replicas if run.gpu_ms else None
        phases = {k: statistics.median(p.get(k, 0.0) for p in run.phases) / replicas
                  for k in dict.fromkeys(k for p in run.phases for k in p)}
        judged = launch if launch is not None else host
        row = {"status": "ok", "host_ms_per_replica": host, "launch_ms_per_replica": launch,
               "gpu_ms_per_replica": gpu, "ratio": judged / gpu if gpu else None,
               "ratio_of": "launch" if launch is not None else "host",
               "host_ratio": host / gpu if gpu else None, "host_phases_ms_per_replica": phases,
               "comm_gpu_ms_per_step": statistics.median(run.comm_ms) if run.comm_ms else None,
               "losses": losses, "precision": precision, "tolerance": tol,
               "problems": run.strategy.invariants(),
               "peak_mem_bytes": int(torch.cuda.max_memory_allocated()) if cuda else None}
        if mode == "graphs" and "eager" in runs:
            eager_losses = [float(v) for v in runs["eager"].losses]
            row["vs_eager_max_rel"] = _max_rel(losses, eager_losses)
        if isinstance(reference, list):
            row["vs_single_eager_max_rel"] = _max_rel(losses, reference)
        elif reference is not None:
            row["reference"] = reference
        checks = [row.get("vs_eager_max_rel"), row.get("vs_single_eager_max_rel")]
        row["losses_match"] = all(c <= tol for c in checks if c is not None) and not row["problems"]
        rows[mode] = row
    for run in runs.values():
        run.strategy.teardown()
    runs.clear()
    gc.collect()
    if cuda:
        torch.cuda.empty_cache()
    label = "single" if name == "single" else f"replicated x{replicas}"
    return [{"form": label, "strategy": name, "replicas": replicas, "mode": mode, **rows[mode]}
            for mode in ("eager", "graphs") if mode in rows]


def _fmt(x: float | None, spec: str) -> str:
    return "-" if x is None else format(x, spec)


def _table(rows: list[dict]) -> list[str]:
    lines = [f"{'form':<14}{'mode':<7}{'host/rep':>9}{'launch':>9}{'GPU/rep':>9}{'launch/GPU':>11} "
             f"{'<=1/32':<7}{'losses':<9}",
             f"{'':<14}{'':<7}{'ms':>9}{'ms':>9}{'ms':>9}{'':>11} {'':<7}{'':<9}"]
    notes = []
    for r in rows:
        if r["status"] != "ok":
            notes.append(f"{r['form']} {r['mode']}: {r['status']}: {r['reason']}")
            lines.append(f"{r['form']:<14}{r['mode']:<7}{'-':>9}{'-':>9}{'-':>9}{'-':>11} {'-':<7}"
                         f"{'[' + str(len(notes)) + ']':<9}")
            continue
        ratio = r["ratio"]
        meets = "-" if ratio is None else ("yes" if ratio <= TARGET else "no")
        match = "equal" if r["losses_match"] else "DIFFERENT"
        lines.append(f"{r['form']:<14}{r['mode']:<7}{_fmt(r['host_ms_per_replica'], '.3f'):>9}"
                     f"{_fmt(r['launch_ms_per_replica'], '.3f'):>9}{_fmt(r['gpu_ms_per_replica'], '.2f'):>9}"
                     f"{_fmt(ratio, '.4f'):>11} {meets:<7}{match:<9}")
        phases = ", ".join(f"{k} {v:.3f}" for k, v in r["host_phases_ms_per_replica"].items())
        diffs = ", ".join(f"{k.removesuffix('_max_rel').replace('_', ' ')} {r[k]:.1e}"
                          for k in ("vs_eager_max_rel", "vs_single_eager_max_rel") if k in r)
        waited = ("" if r["launch_ms_per_replica"] is None else
                  f"; host - launch (waiting for the shared GPU's queue) "
                  f"{r['host_ms_per_replica'] - r['launch_ms_per_replica']:.3f} ms/replica"
                  + (f", host/GPU {r['host_ratio']:.4f}" if r["host_ratio"] is not None else ""))
        notes.append(f"{r['form']} {r['mode']}: {'launch' if r['launch_ms_per_replica'] is not None else 'host'}"
                     f" ms/replica by phase: {phases}{waited}"
                     + (f"; loss max rel diff {diffs} (tol {r['tolerance']:.0e})" if diffs else "")
                     + (f"; all-reduce GPU ms/step {r['comm_gpu_ms_per_step']:.2f}"
                        if r["comm_gpu_ms_per_step"] is not None else "")
                     + (f"; {r['reference']}" if r.get("reference") else "")
                     + (f"; peak {r['peak_mem_bytes'] / 2**30:.1f} GiB" if r["peak_mem_bytes"] else "")
                     + (f"; PROBLEMS: {r['problems']}" if r["problems"] else ""))
        lines[-1] += f"[{len(notes)}]"
    return lines + [""] + [f"[{i}] {n}" for i, n in enumerate(notes, 1)]


def main(argv: list[str] | None = None) -> int:
    args = _args(argv)
    t_start = time.perf_counter()
    hardware = args.hardware or _hardware(args.device)
    out = args.out or Path(os.environ.get("OUT") or "benchmarks/results")
    out.mkdir(parents=True, exist_ok=True)
    stem = out / f"train-graphs_{hardware}_{dt.datetime.now(dt.timezone.utc):%Y-%m-%d}"
    command = "python benchmarks/train_graphs.py" + "".join(f" {shlex.quote(a)}" for a in (argv or sys.argv[1:]))
    env = {"command": command, "python": platform.python_version(), "torch": torch.__version__,
           "device": torch.cuda.get_device_name(0) if args.device == "cuda" else platform.processor() or "cpu",
           "model": args.model, "batch_per_replica": args.batch, "utc": dt.datetime.now(dt.timezone.utc).isoformat(),
           "cpus": os.cpu_count(), "load_avg_1m": round(os.getloadavg()[0], 2)}  # a shared machine shows here
    timer = _Timer(args.device)
    rows: list[dict] = []
    skipped = []
    with open(f"{stem}.jsonl", "w") as jsonl:
        jsonl.write(json.dumps({"env": env}) + "\n")
        jsonl.flush()
        for name, n in [("single", 1)] + [("replicated", n) for n in args.replicas]:
            if rows and time.perf_counter() - t_start > args.time_limit:
                skipped.append(f"{name} x{n}")
                continue
            try:
                form_rows = _measure_form(args, name, n, timer)
            except Exception as exc:  # one form's failure must not cost the others their rows
                label = "single" if name == "single" else f"replicated x{n}"
                reason = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
                form_rows = [{"form": label, "strategy": name, "replicas": n, "mode": mode, "status": "error",
                              "reason": reason} for mode in ("eager", "graphs")]
                gc.collect()
                if args.device == "cuda":
                    torch.cuda.empty_cache()
            for row in form_rows:
                jsonl.write(json.dumps(row) + "\n")
                jsonl.flush()
                rows.append(row)
            print(f"  done: {form_rows[0]['form']} ({time.perf_counter() - t_start:.0f} s)", flush=True)
    graph_rows = [r for r in rows if r["mode"] == "graphs" and r["status"] == "ok"]
    summary = ("graphs: unavailable on this device; eager timed only" if not graph_rows else
               f"graphs: {graph_rows[0]['ratio_of']}/GPU per replica-step "
               f"{max(r['ratio'] for r in graph_rows):.4f} at worst (target <= {TARGET:.4f}): "
               f"{'met' if all(r['ratio'] <= TARGET for r in graph_rows) else 'MISSED'}"
               + ("" if any(r["host_ratio"] is None for r in graph_rows) else
                  f"; whole-step host/GPU with every replica queued on one GPU "
                  f"{max(r['host_ratio'] for r in graph_rows):.4f} at worst"))
    header = [f"# train-graphs: host vs GPU time per replica-step, eager vs CUDA graphs ({hardware})",
              f"# command: {command}",
              "# " + ", ".join(f"{k}={v}" for k, v in env.items() if k != "command"),
              f"# {args.model}, {args.batch} samples per replica, replicas on one {args.device} device, "
              f"{args.blocks} blocks x {args.block_steps} steps per mode after {args.warmup} warmup steps",
              "# host = host clock around step() from an idle device; launch = the same with the device"
              " synchronised before every host phase, minus those syncs (launching, not waiting: see the"
              " script's notes); GPU = CUDA events behind a sleep kernel; median per replica-step"]
    if args.device == "cpu":
        header.append("# CPU numbers: host time is the whole step (CPU work is synchronous); no GPU time")
    text = header + [""] + _table(rows) + ["", summary]
    if skipped:
        text.append(f"not run (over --time-limit {args.time_limit:.0f} s): {', '.join(skipped)}")
    Path(f"{stem}.txt").write_text("\n".join(text) + "\n")
    print("\n".join(text))
    print(f"wrote {stem}.txt and {stem}.jsonl")
    return 0 if all(r.get("losses_match", True) for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
