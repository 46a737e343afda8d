"""``gpucomm train``: one model under single, dp, replicated and ddp — checked equal and timed.

Usage::

    gpucomm train                      # every strategy on every GPU (gpt-tiny on CPU)
    gpucomm train --model gpt-124m --steps 50 --global-batch 32
    gpucomm train --model gpt-tiny --devices cpu,cpu --steps 10 --global-batch 8 --assert-equal
    gpucomm train --model mypkg.models:factory --strategies single,replicated   # your own model
    torchrun --nnodes 2 --nproc-per-node 8 -m gpucomm train --strategies ddp --model gpt-350m

Every strategy sees the same seed, initial weights, data (step s's global batch is made from
(seed, s)) and global batch, split in order across devices; ``single`` always runs first, as the
baseline.  Strategies:

* ``single`` — one device (the first of ``--devices``);
* ``dp`` — ``torch.nn.DataParallel`` over ``--devices`` (CUDA only; "not-applicable" on CPU);
* ``replicated`` — gpucomm's one-process data parallel (``gpucomm.parallel``): persistent replicas on
  ``--devices``, bucketed all-reduce overlapped with backward (``--nproc N``: N processes, each driving
  its share of the devices);
* ``ddp`` — ``DistributedDataParallel``, one process per device (``--nproc``; on CUDA one per distinct
  GPU); under torchrun or SLURM only the strategies that run in processes run, across the job.

Without ``--model``: gpt-124m on GPUs; gpt-tiny when there is no GPU (the output says so), with 20
steps of 16 samples instead of 50 of 32, so that a plain ``gpucomm train`` on a laptop finishes in
well under a minute.  ``--devices cuda:0,cuda:0`` on a one-GPU machine runs dp and replicated over a
repeated cuda:0: the code paths are exercised, the speed is not meaningful (the output says so).

Timing (docs/train.md): nothing inside the timed steps waits for the GPU — per-step CUDA events,
losses read after the last step, batches pinned before the first; on CPU the host clock.  Each row
also records the host time of a step (Python and kernel launches) per device the process drives, and
the GPU time of a step.

Output: a progress bar per strategy and a table.  ``TrainRecord`` rows go to
``records.jsonl`` in ``--out`` (default ``gpucomm-results/train-<UTC yyyymmdd-hhmmss>-<pid>/``, made
when the first row is written: a run that fails before that leaves nothing behind; a DIR that holds result
directories, such as ``gpucomm-results``, gets a new one inside it), with a report.
``--assert-equal`` exits 1 unless every strategy's per-step losses and final parameters match
single's within the tolerance (fp32 1e-5, bf16 autocast 3e-2) and replicated's replicas are
bit-identical.  A strategy that runs out of memory is a failed row naming the strategy, model,
per-device batch and the device's memory; the others still run.  A strategy that runs in processes
(ddp) and does not finish within ``--timeout`` seconds (600 by default; start-up gets at least 60 s of
its own) is stopped and its row fails, naming the rank that hung.  Ctrl-C or SIGTERM keeps every
finished row and still writes the report.

Exit status: 0 ok; 1 a strategy failed or (with ``--assert-equal``) differs; 2 usage error (bad flag,
unknown strategy or model, devices that do not exist, a batch that does not divide, a factory that
fails, an ``--out`` that cannot be a directory, an ``--nproc`` the machine cannot hold); 130
interrupted by Ctrl-C, 143 by SIGTERM.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
import types
from pathlib import Path

from gpucomm._interrupts import Interrupted, ignore_interrupts, interrupts
from gpucomm.train.defaults import (
    BUILTIN_GPTS,
    DEFAULT_GLOBAL_BATCH,
    DEFAULT_STEPS,
    DEFAULT_STRATEGIES,
    OPTIMIZERS,
    PRECISIONS,
)

__all__ = ["add_parser", "config_from_args", "run"]

def _one_line_error(self: argparse.ArgumentParser, message: str) -> None:
    self.exit(2, f"{self.prog}: error: {message}\n")


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register ``gpucomm train`` and return its parser (imports no torch)."""
    p = subparsers.add_parser("train", help="DataParallel vs replicated vs DDP on one model, checked equal and timed",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.error = types.MethodType(_one_line_error, p)
    p.add_argument("--strategies", default=",".join(DEFAULT_STRATEGIES),
                   help=f"comma-separated strategy names, run in order after single (default: "
                        f"{','.join(DEFAULT_STRATEGIES)})")
    p.add_argument("--model", default=None,
                   help=f"built-in ({', '.join((*BUILTIN_GPTS, 'mlp'))}) or pkg.module:factory "
                        f"(default: gpt-124m with a GPU, gpt-tiny without)")
    p.add_argument("--steps", type=int, default=None,
                   help=f"optimizer steps per strategy, warmup included (default {DEFAULT_STEPS['cuda']} with a GPU, "
                        f"{DEFAULT_STEPS['cpu']} without)")
    p.add_argument("--warmup-steps", type=int, default=5, help="leading steps left out of timing (default 5)")
    p.add_argument("--global-batch", type=int, default=None,
                   help=f"samples per step over all devices (default {DEFAULT_GLOBAL_BATCH['cuda']} with a GPU, "
                        f"{DEFAULT_GLOBAL_BATCH['cpu']} without)")
    p.add_argument("--seq-len", type=int, default=None, help="override the GPT context length")
    p.add_argument("--devices", default=None,
                   help="comma-separated, e.g. cuda:0,cuda:1 or 0,1 or cpu,cpu (default: every GPU, or cpu,cpu)")
    p.add_argument("--nproc", type=int, default=None,
                   help="processes of a local launch: ddp's world size; replicated: N processes sharing --devices")
    p.add_argument("--allow-many-procs", action="store_true",
                   help="let --nproc exceed what this machine is judged to hold (4 per core, ~0.5 GiB each)")
    p.add_argument("--graphs", action="store_true",
                   help="capture each replica's step in CUDA graphs; single and replicated only; CUDA only")
    p.add_argument("--seed", type=int, default=0, help="seed of weights and data (default 0)")
    p.add_argument("--lr", type=float, default=3e-4, help="learning rate (default 3e-4)")
    p.add_argument("--optimizer", choices=OPTIMIZERS, default="adamw", help="adamw (default; fused on CUDA) or sgd")
    p.add_argument("--precision", choices=PRECISIONS, default="auto",
                   help="auto: bf16 autocast on CUDA, fp32 on CPU")
    p.add_argument("--bucket-cap-mb", type=float, default=25.0, help="gradient bucket MiB (default 25)")
    p.add_argument("--first-bucket-mb", type=float, default=1.0, help="replicated's first bucket MiB (default 1)")
    p.add_argument("--no-replicated-threads", action="store_true",
                   help="replicated: run replicas one after another instead of one thread each")
    p.add_argument("--assert-equal", action="store_true", help="exit 1 unless every strategy matches single")
    p.add_argument("--tolerance", type=float, default=None, help="relative tolerance for --assert-equal")
    p.add_argument("--timeout", type=float, default=600.0, metavar="SECONDS",
                   help="seconds a strategy run in processes (ddp) may take before its ranks are stopped and "
                        "its row fails, a finite number > 0 (default 600)")
    p.add_argument("--out", type=Path, default=None,
                   help="result directory (default gpucomm-results/train-<UTC time>-<pid>/; made at the first row)")
    p.add_argument("--no-report", action="store_true", help="skip the Markdown/HTML report")
    return p


def config_from_args(args: argparse.Namespace):
    """Flags → :class:`~gpucomm.train.config.TrainConfig` (raises ConfigError/ValueError on bad values)."""
    from gpucomm.records import run_dir_for
    from gpucomm.train.config import TrainConfig

    devices = [d.strip() for d in args.devices.split(",") if d.strip()] if args.devices else []
    return TrainConfig(
        strategies=tuple(s.strip() for s in args.strategies.split(",") if s.strip()), model=args.model,
        steps=args.steps, warmup_steps=args.warmup_steps, global_batch=args.global_batch, seq_len=args.seq_len,
        devices=devices, nproc=args.nproc, allow_many_procs=args.allow_many_procs, graphs=args.graphs,
        seed=args.seed, lr=args.lr, optimizer=args.optimizer, precision=args.precision,
        bucket_cap_mb=args.bucket_cap_mb, first_bucket_mb=args.first_bucket_mb, assert_equal=args.assert_equal,
        replicated_threads=not args.no_replicated_threads,
        tolerance=args.tolerance, out=run_dir_for("train", args.out, create=False), timeout=args.timeout,
    )


class _LazyWriter:
    """Creates ``--out`` and its RecordWriter when the first row arrives: a failed run touches nothing."""

    def __init__(self, out: Path, env_fn) -> None:
        self.out, self._env_fn, self._writer = out, env_fn, None
        self.rows: list = []

    def write(self, record) -> None:
        if self._writer is None:
            from gpucomm.records import RecordWriter

            self._writer = RecordWriter(self.out, self._env_fn())
        self._writer.write(record)
        self.rows.append(record)

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()


def run(args: argparse.Namespace) -> int:
    """Run the comparison described by ``args``; returns the exit status."""
    from gpucomm._console import make_console
    from gpucomm.records import out_problem
    from gpucomm.train.compare import under_launcher
    from gpucomm.train.config import ConfigError
    from gpucomm.train.models import ModelError, load_workload
    from gpucomm.train.requirements import resolve

    console = make_console()
    with interrupts() as interrupted:
        try:
            try:
                config = config_from_args(args)
                # made and undone now, by the one process that writes: a bad --out fails before any work
                problem = out_problem(config.out) if not under_launcher() or _is_rank0() else ""
                if problem:
                    raise ValueError(f"--out {str(config.out)!r}: {problem}")
                resolved = resolve(config)
                workload = load_workload(config.model, seed=config.seed, seq_len=config.seq_len)
            except (TypeError, ValueError) as exc:  # ConfigError and ModelError included
                print(f"gpucomm train: error: {exc}", file=sys.stderr)
                return 2
            writer = _LazyWriter(config.out, lambda: _env(config))
            try:
                return _execute(config, resolved, workload, console, writer, report=not args.no_report)
            except (ConfigError, ModelError) as exc:
                print(f"gpucomm train: error: {exc}", file=sys.stderr)
                return 2
            except KeyboardInterrupt as exc:
                ignore_interrupts()  # the handler did this for a signal; a raise from elsewhere too
                return _interrupted(console, config, writer, interrupted, exc, report=not args.no_report)
            finally:
                writer.close()
        except KeyboardInterrupt:  # before the config existed: nothing to keep
            ignore_interrupts()
            print("gpucomm train: interrupted before any strategy started; nothing written", file=sys.stderr)
            return interrupted.exit_status


def _interrupted(console, config, writer: _LazyWriter, interrupted: Interrupted, exc: KeyboardInterrupt, *,
                 report: bool) -> int:
    from rich.markup import escape

    from gpucomm.train.loop import StrategyInterrupted

    rows = writer.rows
    partial = rows[-1] if rows and rows[-1].status == "interrupted" else None
    kept = len(rows) - (partial is not None)
    line = f"interrupted ({interrupted.name}): {kept} finished row{'s' * (kept != 1)} kept"
    if partial is not None:
        line += f"; {partial.strategy}'s {partial.steps} finished step{'s' * (partial.steps != 1)} kept as a partial row"
    elif isinstance(exc, StrategyInterrupted):
        line += f"; {exc.strategy} was stopped before its first step finished"
    console.print(f"[yellow]{escape(line)}[/]")
    writer.close()
    if rows:
        _table(console, rows, config, report=report)
        console.print(f"records: {config.out / 'records.jsonl'}", highlight=False)
        if report:
            _report(console, config.out)
        _answer(console, rows)
    else:
        console.print("nothing written", highlight=False)
    return interrupted.exit_status


def _env(config):
    from gpucomm.env import collect_env

    return collect_env(config.device_type, extra=_extra(config))


def _execute(config, resolved, workload, console, writer: _LazyWriter, *, report: bool) -> int:
    from gpucomm.train import compare

    launched = compare.under_launcher()
    lead = not launched or _is_rank0()
    if launched and lead:
        console.print("[yellow]under torchrun/SLURM only the strategies that run in processes (ddp) run; the "
                      "others need every device in one process[/]")
    on_record = writer.write if lead else None
    if lead:
        _header(console, config)
    if launched:
        cmp = compare.run_launched(config, on_record=on_record, resolved=resolved)
    else:
        with _Progress(console, config, resolved) as progress:
            cmp = compare.run_comparison(config, on_record=on_record, on_start=progress.start,
                                         on_step=progress.step, resolved=resolved, workload=workload)
    if cmp is None:  # a rank other than 0
        return 0
    return _summarise(console, cmp, config, report=report)


class _Progress:
    """A rich progress bar per strategy: what it is doing, step k of n, and the time it has taken.

    A strategy starts "preparing" (building its model and replicas, moving them to the devices, and its
    first step, where kernels are chosen and compiled — the longest wait of a run); then "warm-up" until
    the timed steps begin; then its name alone.  Until its first step is done a ticker thread redraws
    twice a second, so the elapsed time moves and the bar does not look hung.  From then on the bar is
    refreshed by hand, at most twice a second, from the step callback: no refresh thread competes with
    the training loop for the interpreter while host times and steps are measured.  A strategy that runs
    in other processes (ddp) shows "running in N processes" with the ticker until it ends (its steps are
    not reported across processes).  A strategy that cannot run here (dp on CPU) gets a line saying why,
    not a bar.
    """

    _PERIOD_S = 0.5

    def __init__(self, console, config, resolved) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.steps, self.warmup = config.steps, config.warmup_steps
        self._launched = {p.name: p.world_size for p in resolved if p.process_group}
        self._not_run = {p.name: p.not_applicable for p in resolved if p.not_applicable is not None}
        self._progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                  TextColumn("steps"), TimeElapsedColumn(), console=console,
                                  auto_refresh=False, transient=False)
        self._tasks: dict[str, int] = {}
        self._running: str | None = None
        self._last = 0.0
        self._ticker: tuple[threading.Thread, threading.Event] | None = None

    def __enter__(self) -> _Progress:
        self._progress.start()
        return self

    def __exit__(self, exc_type, *exc) -> None:
        self._stop_ticker()
        if exc_type is None:  # an interrupted launch is not shown as finished
            self._finish_launched()
        self._progress.stop()

    def _start_ticker(self) -> None:
        stop = threading.Event()

        def tick() -> None:
            while not stop.wait(self._PERIOD_S):
                self._progress.refresh()

        thread = threading.Thread(target=tick, name="gpucomm-train-progress", daemon=True)
        thread.start()
        self._ticker = (thread, stop)

    def _stop_ticker(self) -> None:
        if self._ticker is not None:
            thread, stop = self._ticker
            stop.set()
            thread.join()
            self._ticker = None

    def _finish_launched(self) -> None:
        name = self._running
        if name in self._launched and name in self._tasks:
            self._progress.update(self._tasks[name], completed=self.steps,
                                  description=f"{name} ({self._launched[name]} processes)")
            self._progress.refresh()

    def start(self, name: str) -> None:
        self._stop_ticker()
        self._finish_launched()
        self._running = name
        if name in self._not_run:  # a line, not a bar that waits at 0 steps as if hung
            self._progress.console.print(f"{name}: not run here: {self._not_run[name]}", markup=False, highlight=False)
            self._progress.refresh()
            return
        label = (f"{name} (running in {self._launched[name]} processes)" if name in self._launched
                 else f"{name}: preparing (model, devices, first step)")
        self._tasks[name] = self._progress.add_task(label, total=self.steps)
        self._progress.refresh()
        self._start_ticker()

    def step(self, name: str, done: int, total: int) -> None:
        task = self._tasks.get(name)
        if task is None:
            return
        if done == 1:
            self._stop_ticker()
        phase = f"{name}: warm-up" if done < self.warmup else name
        self._progress.update(task, completed=done, description=phase)
        now = time.monotonic()
        if done in (1, self.warmup, total) or now - self._last >= self._PERIOD_S:
            self._last = now
            self._progress.refresh()


def _is_rank0() -> bool:
    import gpucomm.dist as gd

    return gd.read_env().rank == 0


def _extra(config) -> dict:
    return {"strategies": list(config.strategies), "model": config.model, "steps": config.steps,
            "warmup_steps": config.warmup_steps, "global_batch": config.global_batch, "seq_len": config.seq_len,
            "devices": [str(d) for d in config.devices], "nproc": config.nproc, "seed": config.seed,
            "lr": config.lr, "optimizer": config.optimizer, "precision": config.precision,
            "bucket_cap_mb": config.bucket_cap_mb, "first_bucket_mb": config.first_bucket_mb,
            "replicated_threads": config.replicated_threads, "graphs": config.graphs, "timeout": config.timeout}


def _header(console, config) -> None:
    from rich.markup import escape

    devices = escape(", ".join(str(d) for d in config.devices))
    console.print(f"[bold]gpucomm train[/] model={config.model} global batch={config.global_batch} "
                  f"steps={config.steps} (warmup {config.warmup_steps}) devices={devices} "
                  f"precision={config.resolved_precision()}")
    if config.model_defaulted and config.device_type == "cpu":
        console.print("[yellow]no GPU and no --model: using gpt-tiny so that this finishes quickly "
                      "(pass --model gpt-124m for GPT-2 small)[/]")
    if config.device_type == "cpu":
        console.print("[yellow]CPU devices: every figure below is a CPU number[/]")
    if config.device_type == "cuda" and len(set(config.devices)) < len(config.devices):
        console.print("[yellow]--devices repeats a GPU: dp and replicated exercise their code paths, "
                      "but their speed is not meaningful[/]")


def _table(console, records, config, *, report: bool) -> None:
    try:
        from gpucomm.report.terminal import train_table

        more = "report.md" if report else "records.jsonl"  # --no-report: no report.md to point to
        console.print(train_table(records, title=f"gpucomm train — {config.model}", more=more))
    except ImportError:
        for r in records:
            console.print(f"{r.strategy}: {r.status} {r.samples_per_s} samples/s {r.note}")


def _summarise(console, cmp, config, *, report: bool) -> int:
    _table(console, cmp.records, config, report=report)
    for name, eq in cmp.equality.items():
        mark = "[green]equal[/]" if eq.equal else "[red]DIFFERENT[/]"
        run = cmp.runs[name]
        console.print(f"{name} vs single: {mark} (tolerance {eq.tolerance:g}); worst loss step {eq.worst_step}: "
                      f"{run.losses[eq.worst_step]:.6g} vs {cmp.runs['single'].losses[eq.worst_step]:.6g} "
                      f"(rel {eq.max_loss_rel_diff:.2e}); parameters rel {eq.max_param_rel_diff:.2e} "
                      f"(largest in {eq.worst_param or '-'})")
    for r in cmp.records:
        if r.status == "failed":
            console.print(f"[red]{r.strategy} failed:[/] {r.note}")
    if cmp.records:
        console.print(f"records: {config.out / 'records.jsonl'}", highlight=False)
        if report:
            _report(console, config.out)
    _answer(console, cmp.records)
    return 1 if cmp.failed else 0


def _answer(console, records) -> None:
    """The run's last lines: the strategy to pick for this model on these devices and why, and the
    equality verdict — the report's own findings (:func:`gpucomm.report.findings.train_findings`), at the
    most detail that fits in five screen lines at the console's width (``train_glance``)."""
    from gpucomm.report.findings import train_glance
    from gpucomm.report.terminal import Answer

    console.print(Answer(lambda width: train_glance(records, width)))


def _report(console, out: Path) -> None:
    try:
        from gpucomm.report import build
    except ImportError:
        return
    try:
        files = build([out])
        console.print(f"report: {files.get('markdown', out)}")
    except Exception as exc:  # the records are safe on disk; a report failure must not fail the run
        console.print(f"[yellow]report not written: {type(exc).__name__}: {exc}[/]")
