"""``gpucomm train`` — the same model under single, dp, replicated and ddp, checked equal and timed.

Usage::

    gpucomm train --strategies single,dp,replicated,ddp --model gpt-124m --steps 50 --global-batch 32
    gpucomm train --model gpt-tiny --devices cpu,cpu --steps 10 --global-batch 8 --assert-equal
    gpucomm train --model mypkg.models:factory --strategies single,replicated   # your own model
    torchrun --nnodes 2 --nproc-per-node 8 ... -m gpucomm train --strategies ddp --model gpt-350m

Every strategy sees the same seed, initial weights, data (step ``s``'s global batch is made from
``(seed, s)``) and global batch, split in order across devices; ``single`` always runs first, as the
baseline.  Strategies:

* ``single``      — one device (the first of ``--devices``);
* ``dp``          — ``torch.nn.DataParallel`` over ``--devices`` (CUDA only; "not-applicable" on CPU);
* ``replicated``  — gpucomm's one-process data parallel: persistent replicas on ``--devices``,
  bucketed all-reduce through ``gpucomm.comm`` overlapped with backward;
* ``ddp``         — ``DistributedDataParallel``, one process per device (``--nproc``; on CUDA one per
  distinct GPU, ranks on ``cuda:0..nproc-1``); under torchrun/SLURM only ddp runs, across the job.

``--devices cuda:0,cuda:0`` on a one-GPU machine runs dp and replicated over a repeated cuda:0: the
code paths are exercised, the speed is not meaningful (the output says so).

Output: a table; ``TrainRecord`` rows in ``--out/records.jsonl`` (default
``./gpucomm-results/<UTC timestamp>/``) and a report there.  ``--assert-equal`` exits 1 unless every
strategy's per-step losses and final parameters match single's within the tolerance (fp32 1e-5,
bf16 autocast 3e-2; see ``gpucomm.train.config.TOLERANCES``) and replicated's replicas are
bit-identical.

Exit status: 0 ok; 1 a strategy failed or (with ``--assert-equal``) differs; 2 usage error (unknown
strategy or model, a batch that does not divide, a factory that fails).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gpucomm.train.config import OPTIMIZERS, PRECISIONS, TrainConfig, default_out_dir

__all__ = ["add_parser", "config_from_args", "run"]


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register ``gpucomm train`` and return its parser."""
    from gpucomm.train.models import MODELS
    from gpucomm.train.strategies import names

    p = subparsers.add_parser("train", help="DataParallel vs replicated vs DDP on one model, checked equal and timed",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--strategies", default="single,dp,replicated,ddp",
                   help=f"comma-separated, from: {', '.join(names())} (default: all)")
    p.add_argument("--model", default="gpt-124m",
                   help=f"built-in ({', '.join(MODELS)}) or pkg.module:factory (default gpt-124m)")
    p.add_argument("--steps", type=int, default=50, help="optimizer steps per strategy, warmup included")
    p.add_argument("--warmup-steps", type=int, default=5, help="leading steps left out of timing (default 5)")
    p.add_argument("--global-batch", type=int, default=32, help="samples per step over all devices (default 32)")
    p.add_argument("--seq-len", type=int, default=None, help="override the GPT context length")
    p.add_argument("--devices", default=None,
                   help="comma-separated, e.g. cuda:0,cuda:1 or 0,1 or cpu,cpu (default: every GPU, or cpu,cpu)")
    p.add_argument("--nproc", type=int, default=None, help="DDP processes for a local launch")
    p.add_argument("--seed", type=int, default=0, help="seed of weights and data (default 0)")
    p.add_argument("--lr", type=float, default=3e-4, help="AdamW learning rate (default 3e-4)")
    p.add_argument("--optimizer", choices=OPTIMIZERS, default="adamw", help="adamw (default) or sgd")
    p.add_argument("--precision", choices=PRECISIONS, default="auto",
                   help="auto: bf16 autocast on CUDA, fp32 on CPU")
    p.add_argument("--bucket-cap-mb", type=float, default=25.0, help="gradient bucket MiB (default 25)")
    p.add_argument("--first-bucket-mb", type=float, default=1.0, help="replicated's first bucket MiB (default 1)")
    p.add_argument("--no-replicated-threads", action="store_true",
                   help="replicated: run replicas one after another instead of one thread each")
    p.add_argument("--assert-equal", action="store_true", help="exit 1 unless every strategy matches single")
    p.add_argument("--tolerance", type=float, default=None, help="relative tolerance for --assert-equal")
    p.add_argument("--out", type=Path, default=None, help="result directory")
    p.add_argument("--no-report", action="store_true", help="skip the Markdown/HTML report")
    return p


def config_from_args(args: argparse.Namespace) -> TrainConfig:
    """Flags → :class:`TrainConfig` (raises ValueError on bad values)."""
    devices = [d.strip() for d in args.devices.split(",") if d.strip()] if args.devices else []
    return TrainConfig(
        strategies=tuple(s.strip() for s in args.strategies.split(",") if s.strip()), model=args.model,
        steps=args.steps, warmup_steps=args.warmup_steps, global_batch=args.global_batch, seq_len=args.seq_len,
        devices=devices, nproc=args.nproc, seed=args.seed, lr=args.lr, optimizer=args.optimizer, precision=args.precision,
        bucket_cap_mb=args.bucket_cap_mb, first_bucket_mb=args.first_bucket_mb, assert_equal=args.assert_equal,
        replicated_threads=not args.no_replicated_threads,
        tolerance=args.tolerance, out=args.out or default_out_dir(),
    )


def run(args: argparse.Namespace) -> int:
    """Run the comparison described by ``args``; returns the exit status."""
    from rich.console import Console

    from gpucomm.train.config import ConfigError
    from gpucomm.train.models import ModelError

    console = Console(stderr=False)
    try:
        config = config_from_args(args)
    except (TypeError, ValueError) as exc:
        print(f"gpucomm train: {exc}", file=sys.stderr)
        return 2
    try:
        return _execute(config, console, report=not args.no_report)
    except (ConfigError, ModelError) as exc:
        print(f"gpucomm train: {exc}", file=sys.stderr)
        return 2


def _execute(config: TrainConfig, console, *, report: bool) -> int:
    from gpucomm.records import RecordWriter, collect_env
    from gpucomm.train import compare

    launched = compare.under_launcher()
    lead = not launched or _is_rank0()
    if launched and lead:
        console.print("[yellow]under torchrun/SLURM only per-process strategies (ddp) run; the others need "
                      "every device in one process[/]")
    writer = RecordWriter(config.out, collect_env(config.device_type, extra=_extra(config))) if lead else None
    try:
        if lead:
            _header(console, config)
        if launched:
            cmp = compare.run_launched(config, on_record=writer.write if writer else None)
        else:
            with console.status("") as status:
                cmp = compare.run_comparison(
                    config, on_record=writer.write if writer else None,
                    on_start=lambda name: status.update(f"training [bold]{name}[/] ..."))
    finally:
        if writer is not None:
            writer.close()
    if cmp is None:  # a rank other than 0
        return 0
    return _summarise(console, cmp, config, report=report)


def _is_rank0() -> bool:
    import gpucomm.dist as gd

    return gd.read_env().rank == 0


def _extra(config: TrainConfig) -> dict:
    return {"strategies": list(config.strategies), "model": config.model, "steps": config.steps,
            "warmup_steps": config.warmup_steps, "global_batch": config.global_batch, "seq_len": config.seq_len,
            "devices": [str(d) for d in config.devices], "nproc": config.nproc, "seed": config.seed,
            "lr": config.lr, "optimizer": config.optimizer, "precision": config.precision, "bucket_cap_mb": config.bucket_cap_mb,
            "first_bucket_mb": config.first_bucket_mb, "replicated_threads": config.replicated_threads}


def _header(console, config: TrainConfig) -> None:
    from rich.markup import escape

    devices = escape(", ".join(str(d) for d in config.devices))
    console.print(f"[bold]gpucomm train[/] model={config.model} global batch={config.global_batch} "
                  f"steps={config.steps} (warmup {config.warmup_steps}) devices={devices} "
                  f"precision={config.resolved_precision()}")
    if config.device_type == "cpu":
        console.print("[yellow]CPU devices: every figure below is a CPU number[/]")
    if config.device_type == "cuda" and len(set(config.devices)) < len(config.devices):
        console.print("[yellow]--devices repeats a GPU: dp and replicated exercise their code paths, "
                      "but their speed is not meaningful[/]")


def _summarise(console, cmp, config: TrainConfig, *, report: bool) -> int:
    try:
        from gpucomm.report.terminal import train_table

        console.print(train_table(cmp.records, title=f"gpucomm train — {config.model}"))
    except ImportError:
        for r in cmp.records:
            console.print(f"{r.strategy}: {r.status} {r.samples_per_s} samples/s {r.note}")
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
    console.print(f"records: {config.out / 'records.jsonl'}")
    if report:
        _report(console, config.out)
    return 1 if cmp.failed else 0


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
