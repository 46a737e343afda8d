"""``gpucomm advise``: which training strategy to use on given hardware, predicted and explained.

Usage::

    gpucomm advise --hardware h200-nvswitch --gpus 8 --model gpt-124m --global-batch 256
    gpucomm advise --hardware h100-nvswitch --nodes 4 --gpus 8 --layers 32 --d-model 4096 --seq-len 2048
    gpucomm advise --hardware h100-nvswitch --gpus 8 --params 7e9 --seq-len 2048 --dtype bf16
    gpucomm advise --hardware h200-nvswitch --model gpt-350m --scale --out results/advice
    gpucomm advise --calibrate results/bench results/train --save-profile cpu.json
    gpucomm advise --profile cpu.json --gpus 2 --model gpt-tiny --global-batch 32 --json

What it prints: one row per strategy (dp, replicated, ddp, zero1, zero2, zero3, fsdp) ranked by predicted
step time — throughput, scaling efficiency, memory per GPU against capacity (strategies that do not fit
are flagged, not ranked), exposed-communication share — and a plain-language reason for each.  ``--scale``
adds predicted throughput and efficiency from 1 to ``--max-gpus`` GPUs (weak scaling: the per-GPU batch
``global_batch / (nodes x gpus)`` stays fixed), as a table, and as a plot (PNG + SVG) when ``--out`` is given.

Hardware: ``--hardware`` names a datasheet profile (``gpucomm.advisor.hardware``; ``--network`` swaps the
network between machines), ``--profile`` a calibrated one saved by ``--save-profile``, and
``--calibrate DIR…`` fits one from ``gpucomm bench``/``gpucomm train`` records (measured values override
datasheet ones; CPU records give a ``cpu-gloo`` profile, which exists only this way).

Assumptions are printed with the table: the MFU (``--mfu``, default 0.30) when compute is not measured,
and any per-device cost that was not calibrated.  ``--out DIR`` writes AdviceRecord and ScaleRecord rows
(env block first) that ``gpucomm report DIR`` renders.

Exit status: 0 ok; 2 usage error (unknown hardware, model, network, bad flags, unusable records).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["AdviseConfig", "add_parser", "config_from_args", "run"]


@dataclass(kw_only=True, slots=True)
class AdviseConfig:
    """Parsed ``gpucomm advise`` flags."""

    hardware: str | None
    network: str | None
    profile: str | None
    calibrate: list[str]
    save_profile: str | None
    gpus: int | None
    """Per machine; None = the profile's full machine."""
    nodes: int
    model: str | None
    params: int | None
    layers: int | None
    d_model: int | None
    global_batch: int
    seq_len: int | None
    dtype: str
    optimizer: str
    mfu: float
    strategies: tuple[str, ...]
    scale: bool
    max_gpus: int
    json: bool
    out: str | None

    def __post_init__(self) -> None:
        if (self.gpus is not None and self.gpus < 1) or self.nodes < 1:
            raise ValueError(f"--gpus/--nodes: expected >= 1, but got --gpus {self.gpus} --nodes {self.nodes}")
        if not 0 < self.mfu <= 1:
            raise ValueError(f"--mfu: expected a fraction in (0, 1], but got {self.mfu}")
        if self.max_gpus < 1:
            raise ValueError(f"--max-gpus: expected >= 1, but got {self.max_gpus}")
        if not (self.hardware or self.profile or self.calibrate):
            raise ValueError("give --hardware NAME, --profile PATH or --calibrate DIR")


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``advise``; its help is this module's docstring."""
    p = subparsers.add_parser("advise", help="recommend a training strategy from a calibrated cost model",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    hw = p.add_argument_group("hardware")
    hw.add_argument("--hardware", help="datasheet profile, e.g. h200-nvswitch (see --list-hardware)")
    hw.add_argument("--network", help="network between machines: ib-ndr400x8, ib-hdr200x8, roce-400x8, roce-400x4")
    hw.add_argument("--profile", help="a calibrated profile saved with --save-profile")
    hw.add_argument("--calibrate", nargs="+", default=[], metavar="RESULTS_DIR",
                    help="fit the profile from bench/train records in these directories")
    hw.add_argument("--save-profile", metavar="PATH", help="write the (calibrated) profile as JSON")
    hw.add_argument("--gpus", type=int, default=None,
                    help="GPUs (or processes) per machine (default: a full machine of the profile, 8 for GPUs)")
    hw.add_argument("--nodes", type=int, default=1, help="machines (default 1)")
    wl = p.add_argument_group("workload")
    wl.add_argument("--model", help="gpt-tiny, gpt-124m, gpt-350m or mlp")
    wl.add_argument("--params", type=float, help="parameter count instead of a model name, e.g. 7e9 (no shape: "
                                                 "activations are not counted)")
    wl.add_argument("--layers", type=int, help="a custom GPT of this depth (with --d-model)")
    wl.add_argument("--d-model", type=int, help="a custom GPT of this width (with --layers)")
    wl.add_argument("--global-batch", type=int, default=256, help="samples per optimizer step (default 256)")
    wl.add_argument("--seq-len", type=int, help="tokens per sample (GPT default: its context length)")
    wl.add_argument("--dtype", default="bf16", help="fp32, bf16-autocast, bf16 or fp16 (default bf16: "
                                                    "ZeRO-style mixed precision, 16 bytes/param with Adam)")
    wl.add_argument("--optimizer", default="adam", choices=("adam", "sgd"), help="default adam")
    wl.add_argument("--mfu", type=float, default=None, help="model FLOPs utilisation when compute is not "
                                                            "measured (default 0.30, from measured-h200.md)")
    out = p.add_argument_group("output")
    out.add_argument("--strategies", default="dp,replicated,ddp,zero1,zero2,zero3,fsdp")
    out.add_argument("--scale", action="store_true", help="also predict 1 … --max-gpus GPUs")
    out.add_argument("--max-gpus", type=int, default=4096)
    out.add_argument("--json", action="store_true", help="print JSON instead of tables")
    out.add_argument("--out", metavar="DIR", help="write AdviceRecord/ScaleRecord rows (and the scale plot)")
    return p


def config_from_args(args: argparse.Namespace) -> AdviseConfig:
    """Typed config from parsed flags; raises ValueError on bad values."""
    from gpucomm.advisor.plan import DEFAULT_MFU, STRATEGIES

    strategies = tuple(s.strip() for s in args.strategies.split(",") if s.strip())
    bad = [s for s in strategies if s not in STRATEGIES]
    if bad or not strategies:
        raise ValueError(f"--strategies {args.strategies!r}: expected a comma list of {', '.join(STRATEGIES)}")
    params = args.params
    if params is not None and (not math.isfinite(params) or params < 1):
        raise ValueError(f"--params: expected a count >= 1, but got {params}")
    return AdviseConfig(hardware=args.hardware, network=args.network, profile=args.profile,
                        calibrate=list(args.calibrate), save_profile=args.save_profile, gpus=args.gpus,
                        nodes=args.nodes, model=args.model, params=None if params is None else int(params),
                        layers=args.layers, d_model=args.d_model,
                        global_batch=args.global_batch, seq_len=args.seq_len, dtype=args.dtype,
                        optimizer=args.optimizer, mfu=DEFAULT_MFU if args.mfu is None else args.mfu,
                        strategies=strategies, scale=args.scale, max_gpus=args.max_gpus, json=args.json,
                        out=args.out)


def _usage(msg: str) -> int:
    print(f"gpucomm advise: error: {msg}", file=sys.stderr)
    return 2


def _resolve_profile(cfg: AdviseConfig):
    from gpucomm import records
    from gpucomm.advisor import calibrate, hardware

    if cfg.calibrate:
        results = records.load(*cfg.calibrate)
        profile = calibrate.calibrate(results, cfg.hardware, label=",".join(cfg.calibrate))
    elif cfg.profile:
        profile = calibrate.load_profile(cfg.profile)
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            profile = hardware.get(cfg.hardware)
        if profile is None:
            raise ValueError(f"--hardware {cfg.hardware!r}: no such profile; known: {', '.join(hardware.names())}"
                             + ("; cpu-gloo exists only via --calibrate" if cfg.hardware == "cpu-gloo" else ""))
    if cfg.network:
        link = hardware.NETWORKS.get(cfg.network)
        if link is None:
            raise ValueError(f"--network {cfg.network!r}: no such network; known: {', '.join(sorted(hardware.NETWORKS))}")
        profile = hardware.with_network(profile, link)
    if cfg.gpus is None:
        cfg.gpus = profile.max_gpus_per_node
    if cfg.gpus > profile.max_gpus_per_node:
        raise ValueError(f"--gpus {cfg.gpus}: {profile.name} machines hold at most {profile.max_gpus_per_node} "
                         f"GPUs; use --nodes for more machines")
    if cfg.nodes > 1 and profile.inter is None:
        raise ValueError(f"--nodes {cfg.nodes}: profile {profile.name!r} has no network between machines; "
                         f"pass --network")
    return profile


def _advice_rows(preds, profile, wl) -> list[Any]:
    from gpucomm.records import AdviceRecord

    return [AdviceRecord(strategy=p.strategy, hardware=profile.name, nodes=p.nodes, gpus_per_node=p.gpus_per_node,
                         model=wl.model, params=wl.params, global_batch=wl.global_batch, seq_len=wl.seq_len,
                         step_time_s=p.step_time_s, samples_per_s=p.samples_per_s,
                         scaling_efficiency=p.scaling_efficiency, memory_per_gpu_bytes=int(p.memory_bytes),
                         memory_capacity_bytes=int(p.capacity_bytes or 0), fits=p.fits, comm_share=p.comm_share,
                         rank=p.rank, reason=p.reason, calibrated=profile.calibrated,
                         tokens_per_s=p.tokens_per_s, compute_s=p.compute_s + p.optimizer_s, comm_s=p.comm_s)
            for p in preds]


def _scale_rows(preds, profile) -> list[Any]:
    from gpucomm.records import ScaleRecord

    return [ScaleRecord(strategy=p.strategy, hardware=profile.name, gpus=p.gpus, nodes=p.nodes,
                        samples_per_s=p.samples_per_s, scaling_efficiency=p.scaling_efficiency,
                        step_time_s=p.step_time_s, fits=p.fits) for p in preds if p.applicable]


def _assumptions(preds) -> list[str]:
    seen: list[str] = []
    for p in preds:
        for a in p.assumptions:
            if a not in seen:
                seen.append(a)
    return seen


def _print_tables(advice, scale_rows, assumptions, profile) -> None:
    from rich.console import Console
    from rich.table import Table

    from gpucomm.report.terminal import advice_table

    console = Console()
    if not console.is_terminal:  # piped or captured: do not squeeze the reasons into 80 columns
        console = Console(width=200)
    console.print(advice_table(advice, title=f"gpucomm advise — predictions for {profile.name}"
                                             + (" (calibrated)" if profile.calibrated else " (datasheet)")))
    for a in assumptions:
        console.print(f"  assumption: {a}")
    if scale_rows:
        strategies = list(dict.fromkeys(r.strategy for r in scale_rows))
        table = Table(title="predicted weak scaling: samples/s (efficiency)")
        table.add_column("GPUs", justify="right")
        for s in strategies:
            table.add_column(s, justify="right")
        by = {(r.strategy, r.gpus): r for r in scale_rows}
        for gpus in sorted({r.gpus for r in scale_rows}):
            cells = []
            for s in strategies:
                r = by.get((s, gpus))
                cells.append("—" if r is None else f"{r.samples_per_s:,.0f} ({r.scaling_efficiency:.0%})"
                             + ("" if r.fits else " OOM"))
            table.add_row(str(gpus), *cells)
        console.print(table)


def _write_out(cfg: AdviseConfig, rows: list[Any], scale_rows: list[Any], profile) -> list[Path]:
    from gpucomm.records import RecordWriter, collect_env

    device_type = "cpu" if profile.kind == "cpu-gloo" else "cuda"
    env = collect_env(device_type, extra={"advise": {"hardware": profile.name, "calibrated": profile.calibrated,
                                                     "mfu": cfg.mfu, "prediction": True}})
    env.devices = []  # a prediction: the machine it ran on is not the machine it describes
    with RecordWriter(cfg.out, env) as w:
        for r in [*rows, *scale_rows]:
            w.write(r)
    written = [Path(cfg.out) / "records.jsonl"]
    if scale_rows:
        from gpucomm.report.plots import scale_plot
        from gpucomm.report.runs import load_runs

        fig = scale_plot(load_runs([cfg.out]))
        if fig is not None:
            for ext, data in (("png", fig.png), ("svg", fig.svg)):
                path = Path(cfg.out) / f"advise-scale.{ext}"
                path.write_bytes(data)
                written.append(path)
    return written


def _calibration_summary(profile) -> dict[str, Any]:
    c = profile.calibration or {}
    return {"profile": profile.name, "kind": profile.kind, "link": {"bandwidth_gbps": profile.intra.bandwidth_gbps,
                                                                   "alpha_us": profile.intra.alpha_us},
            "collective_fits": len(c.get("collectives", [])),
            "compute_models": sorted((c.get("compute") or {}).get("models", {})),
            "per_device_s": c.get("per_device_s", {})}


def run(args: argparse.Namespace) -> int:
    """Run ``gpucomm advise``; returns the exit status."""
    from gpucomm.advisor import calibrate, plan, workload
    from gpucomm.records import RecordError

    try:
        cfg = config_from_args(args)
        profile = _resolve_profile(cfg)
    except (ValueError, RecordError, OSError) as exc:
        return _usage(str(exc))
    if cfg.save_profile:
        calibrate.save_profile(profile, cfg.save_profile)
    shape = None
    if (cfg.layers is None) != (cfg.d_model is None):
        return _usage("--layers and --d-model go together")
    if cfg.layers is not None:
        try:
            cfg.model, shape = workload.custom_gpt(cfg.layers, cfg.d_model, seq_len=cfg.seq_len or 1024)
        except ValueError as exc:
            return _usage(str(exc))
    if cfg.model is None and cfg.params is None:
        if cfg.calibrate or cfg.save_profile:
            print(json.dumps(_calibration_summary(profile), indent=1, default=str))
            return 0
        return _usage("give --model NAME or --params N")
    try:
        wl = workload.make_workload(cfg.model, params=cfg.params, dtype=cfg.dtype, optimizer=cfg.optimizer,
                                    global_batch=cfg.global_batch, seq_len=cfg.seq_len, shape=shape)
        preds = plan.advise(profile, wl, gpus_per_node=cfg.gpus, nodes=cfg.nodes, mfu=cfg.mfu,
                            strategies=cfg.strategies)
        per_gpu = wl.global_batch / (cfg.gpus * cfg.nodes)
        scaled = plan.scale(profile, wl, per_gpu_batch=per_gpu, max_gpus=cfg.max_gpus, mfu=cfg.mfu,
                            strategies=cfg.strategies) if cfg.scale else []
    except (ValueError, plan.PredictionError) as exc:
        return _usage(str(exc))
    rows, scale_rows = _advice_rows(preds, profile, wl), _scale_rows(scaled, profile)
    assumptions = _assumptions(preds)
    if cfg.json:
        from gpucomm.records import to_row

        print(json.dumps({"hardware": profile.name, "calibrated": profile.calibrated, "assumptions": assumptions,
                          "advice": [to_row(r) for r in rows], "scale": [to_row(r) for r in scale_rows]},
                         indent=1, allow_nan=False))
    else:
        _print_tables(rows, scale_rows, assumptions, profile)
    if cfg.out:
        try:
            written = _write_out(cfg, rows, scale_rows, profile)
        except OSError as exc:
            return _usage(str(exc))
        if not cfg.json:
            print("wrote " + ", ".join(map(str, written)))
    return 0
