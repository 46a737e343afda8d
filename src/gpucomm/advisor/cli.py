"""``gpucomm advise``: how to train a model on given hardware — layout, step time, memory — predicted and explained.

Two modes share the flags:

* **the planner** (``--arch``, ``--layout``, or a preset ``gpucomm train`` does not run: llama2-7b/13b/70b,
  llama3-8b/70b/405b, gpt3-175b) searches tensor/pipeline/context/data parallel sizes, sharding
  (none, zero1, zero2, zero3, fsdp, hsdp), micro-batch and activation checkpointing, and ranks the layouts
  that fit by predicted tokens/s per GPU; the recommendation is the simplest layout within 5% of the fastest::

    gpucomm advise --model llama3-8b --hardware h100-nvswitch --gpus 8 --global-batch 16
    gpucomm advise --model llama3-70b --hardware a100-nvlink3 --nodes 8 --global-batch 64 \\
        --layout shard=fsdp,ac=full
    gpucomm advise --arch layers=24,hidden=2048,heads=16,seq=2048 --hardware h100-nvswitch \\
        --nodes 4 --global-batch 512 --layout tp=1,pp=1,cp=1,dp=32,shard=zero2,mb=16,ac=none --json

  ``--layout tp=..,pp=..,cp=..,dp=..,shard=none|zero1|zero2|zero3|fsdp|hsdp,mb=..,ac=none|selective|op|full|auto
  [,vpp=..]`` evaluates exactly that layout; keys left out are searched.  ``--arch layers=..,hidden=..,
  heads=..[,kv_heads=..,ffn=..,ffn_kind=gelu-4h|swiglu,vocab=..,seq=..,tied=0|1]`` describes a model.
  ``--kernels unfused`` predicts a stack without flash attention and fused elementwise kernels
  (Megatron-LM 2019's: the ``s x s`` scores in memory, one pass per op); the default is ``fused``.
  ``--json`` prints ``{"advice": [rows, best first]}``; each row has ``layout`` (every key above),
  ``tokens_per_s_per_gpu``, ``step_time_s``, ``memory_per_gpu_bytes`` and each ``memory_*_bytes`` term,
  ``memory_capacity_bytes``, ``fits``, ``mfu`` and ``reason``.

* **named strategies** (gpt-tiny, gpt-124m, gpt-350m, mlp, ``--params``, ``--layers/--d-model``): the
  rows ``gpucomm train`` measures — dp (torch.nn.DataParallel), replicated, ddp, zero1-3, fsdp — on one to
  64 GPUs.

Usage (named strategies)::

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

Hardware: ``--list-hardware`` prints every profile and network with its figures and sources.  Capacity is
the usable memory the driver reports, not the datasheet's.  ``--hardware`` names a datasheet profile (``gpucomm.advisor.hardware``; ``--network`` swaps the
network between machines), ``--profile`` a calibrated one saved by ``--save-profile``, and
``--calibrate DIR…`` fits one from ``gpucomm bench``/``gpucomm train`` records (measured values override
datasheet ones; CPU records give a ``cpu-gloo`` profile, which exists only this way).

Assumptions are printed with the table: the planner's efficiency constants and memory reserve; for named
strategies the MFU (``--mfu``, default 0.30) when compute is not measured, and any per-device cost that was
not calibrated.  ``--out DIR`` writes AdviceRecord and ScaleRecord rows
(env block first) that ``gpucomm report DIR`` renders.

Exit status: 0 ok; 2 usage error — one line naming the flag or key, the value, the rule and a fix (unknown
hardware, model, network or layout key, tp not dividing the heads or exceeding a machine, dp*tp*pp*cp not the
GPU count, a micro-batch or global batch that does not divide, unusable records, an unwritable path).
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
    arch: str | None
    """``--arch`` string (planner)."""
    layout: str | None
    """``--layout`` string (planner)."""
    kernels: str = "fused"
    """``--kernels`` (planner): the software stack's kernels, fused or unfused."""
    loss: str = "upcast"
    """``--loss``: upcast or fused cross-entropy."""
    weights: str = "fp32"
    """``--weights``: weight storage, fp32 (autocast) or 16-bit with an fp32 master."""
    top: int
    params: int | None
    layers: int | None
    d_model: int | None
    global_batch: int | None
    """None: 256 for named strategies; about 2M tokens (a multiple of the GPU count) for the planner."""
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
        if self.seq_len is not None and self.seq_len < 1:
            raise ValueError(f"--seq-len {self.seq_len}: expected tokens per sample >= 1; e.g. --seq-len 2048")
        if self.global_batch is not None and self.global_batch < 1:
            raise ValueError(f"--global-batch {self.global_batch}: expected samples per step >= 1")
        if self.top < 1:
            raise ValueError(f"--top {self.top}: expected >= 1")
        if self.max_gpus < 1:
            raise ValueError(f"--max-gpus: expected >= 1, but got {self.max_gpus}")
        if not (self.hardware or self.profile or self.calibrate):  # --list-hardware is handled before
            raise ValueError("give --hardware NAME, --profile PATH or --calibrate DIR")


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``advise``; its help is this module's docstring."""
    p = subparsers.add_parser("advise", help="recommend a training strategy from a calibrated cost model",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    hw = p.add_argument_group("hardware")
    hw.add_argument("--hardware", help="datasheet profile, e.g. h200-nvswitch (see --list-hardware)")
    hw.add_argument("--list-hardware", action="store_true",
                    help="print every hardware profile and network with its figures and sources, then exit")
    hw.add_argument("--network", help="network between machines: ib-ndr400x8, ib-hdr200x8, roce-400x8, roce-400x4")
    hw.add_argument("--profile", help="a calibrated profile saved with --save-profile")
    hw.add_argument("--calibrate", nargs="+", default=[], metavar="RESULTS_DIR",
                    help="fit the profile from bench/train records in these directories")
    hw.add_argument("--save-profile", metavar="PATH", help="write the (calibrated) profile as JSON")
    hw.add_argument("--gpus", type=int, default=None,
                    help="GPUs (or processes) per machine (default: a full machine of the profile, 8 for GPUs)")
    hw.add_argument("--nodes", type=int, default=1, help="machines (default 1)")
    wl = p.add_argument_group("workload")
    wl.add_argument("--model", help="a preset: gpt-tiny, gpt-124m, gpt-350m, mlp (named strategies) or "
                                    "llama2-7b/13b/70b, llama3-8b/70b/405b, gpt3-175b (planner)")
    wl.add_argument("--arch", help="a model shape: layers=..,hidden=..,heads=..[,kv_heads=..,ffn=..,"
                                   "ffn_kind=gelu-4h|swiglu,vocab=..,seq=..,tied=0|1] (planner)")
    wl.add_argument("--layout", help="tp=..,pp=..,cp=..,dp=..,shard=none|zero1|zero2|zero3|fsdp|hsdp,mb=..,"
                                     "ac=none|selective|op|full|auto[,vpp=..]: keys given are fixed, the rest "
                                     "searched (planner); ac=selective is Megatron's (attention core "
                                     "recomputed), ac=op torchtitan's per-op policy (every second matmul)")
    wl.add_argument("--kernels", default="fused",
                    help="planner: the software stack's kernels, fused (default: flash attention, fused "
                         "norm/bias/GeLU/dropout, sequence parallel) or unfused (Megatron-LM 2019: s x s "
                         "scores in memory, one kernel per elementwise op)")
    wl.add_argument("--loss", default="upcast", help="cross-entropy: upcast (default: F.cross_entropy on fp32 "
                                                     "logits) or fused (a fused/chunked kernel)")
    wl.add_argument("--weights", default="fp32", help="weight storage: fp32 (default; autocast) or bf16/fp16 "
                                                      "(16-bit weights, fp32 master in the optimizer)")
    wl.add_argument("--params", type=float, help="parameter count instead of a model name, e.g. 7e9 (no shape: "
                                                 "activations are not counted)")
    wl.add_argument("--layers", type=int, help="a custom GPT of this depth (with --d-model)")
    wl.add_argument("--d-model", type=int, help="a custom GPT of this width (with --layers)")
    wl.add_argument("--global-batch", type=int, default=None,
                    help="samples (sequences) per optimizer step (default: 256 for named strategies; about 2M "
                         "tokens, a multiple of the GPU count, for the planner)")
    wl.add_argument("--seq-len", type=int, help="tokens per sample (GPT default: its context length)")
    wl.add_argument("--dtype", default="bf16", help="fp32, bf16-autocast, bf16 or fp16 (default bf16: "
                                                    "ZeRO-style mixed precision, 16 bytes/param with Adam)")
    wl.add_argument("--optimizer", default="adam", choices=("adam", "sgd"), help="default adam")
    wl.add_argument("--mfu", type=float, default=None, help="model FLOPs utilisation when compute is not "
                                                            "measured, named strategies only (default 0.30: "
                                                            "GPT-124M measured on one H200)")
    out = p.add_argument_group("output")
    out.add_argument("--strategies", default="dp,replicated,ddp,zero1,zero2,zero3,fsdp",
                     help="named strategies to predict, comma-separated (default: all seven)")
    out.add_argument("--top", type=int, default=10, help="planner: layouts to show (default 10)")
    out.add_argument("--scale", action="store_true", help="also predict 1 … --max-gpus GPUs (named strategies)")
    out.add_argument("--max-gpus", type=int, default=4096,
                     help="largest GPU count --scale predicts, doubling from 1 (default 4096)")
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
                        nodes=args.nodes, model=args.model, arch=args.arch, layout=args.layout,
                        kernels=getattr(args, "kernels", "fused"), top=args.top, loss=args.loss,
                        weights=args.weights,
                        params=None if params is None else int(params),
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
                         tokens_per_s=p.tokens_per_s, compute_s=p.compute_s + p.optimizer_s, comm_s=p.comm_s,
                         layout=_named_layout(p), exposed_comm_s=p.exposed_comm_s,
                         tokens_per_s_per_gpu=None if p.tokens_per_s is None else p.tokens_per_s / p.gpus)
            for p in preds]


def _named_layout(p) -> dict[str, Any]:
    """The layout a named strategy amounts to: data parallel over every device, its sharding."""
    shard = {"zero1": "zero1", "zero2": "zero2", "zero3": "zero3", "fsdp": "fsdp"}.get(p.strategy, "none")
    return {"tp": 1, "pp": 1, "cp": 1, "dp": p.gpus, "shard": shard, "mb": None, "ac": "none", "vpp": 1}


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
        console.print(f"  assumption: {a}", highlight=False, markup=False)
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
    from gpucomm.env import collect_env
    from gpucomm.records import RecordWriter

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
    if getattr(args, "list_hardware", False):
        from gpucomm.advisor import hardware

        print("\n".join(hardware.describe()))
        return 0
    from gpucomm.advisor import calibrate, plan, workload
    from gpucomm.records import RecordError

    try:
        cfg = config_from_args(args)
        profile = _resolve_profile(cfg)
    except (ValueError, RecordError, OSError) as exc:
        return _usage(str(exc))
    if cfg.save_profile:
        try:
            calibrate.save_profile(profile, cfg.save_profile)
        except OSError as exc:
            return _usage(f"--save-profile {cfg.save_profile!r}: cannot write ({exc.strerror or exc}); "
                          f"give a path in a writable directory")
    if cfg.out:
        bad = _unwritable(cfg.out)
        if bad:
            return _usage(bad)
    if _planner_mode(cfg):
        return _run_planner(cfg, profile)
    if cfg.kernels != "fused":
        return _usage(f"--kernels {cfg.kernels}: the planner's option (--arch, --layout or a planner preset); "
                      f"drop it for named strategies")
    if cfg.global_batch is None:
        cfg.global_batch = 256
    shape = None
    if (cfg.layers is None) != (cfg.d_model is None):
        return _usage("--layers and --d-model go together")
    if cfg.layers is not None:
        try:
            cfg.model, shape = workload.custom_gpt(cfg.layers, cfg.d_model, seq_len=cfg.seq_len or 1024)
        except ValueError as exc:
            return _usage(str(exc))
    n = cfg.gpus * cfg.nodes
    if cfg.global_batch % n:
        return _usage(f"--global-batch {cfg.global_batch}: must divide over the {n} GPUs (--nodes x --gpus); "
                      f"use a multiple of {n}, e.g. {n * max(1, round(cfg.global_batch / n))}")
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
    return _emit(cfg, rows, scale_rows, _assumptions(preds), profile)


def _emit(cfg: AdviseConfig, rows: list[Any], scale_rows: list[Any], assumptions: list[str], profile) -> int:
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


_NAMED_MODELS = ("gpt-tiny", "gpt-124m", "gpt-350m", "mlp")


def _unwritable(out: str) -> str:
    """Why ``--out`` cannot become a results directory (checked before anything runs or prints), or ""."""
    path = Path(out)
    if path.exists() and not path.is_dir():
        return f"--out {out!r}: is a file, not a directory; give a new or existing directory"
    for parent in path.parents:
        if parent.exists():
            if not parent.is_dir():
                return f"--out {out!r}: {str(parent)!r} is a file; give a path under a directory"
            break
    return ""


def _planner_mode(cfg: AdviseConfig) -> bool:
    """The planner runs for --arch, --layout, or a preset that ``gpucomm train`` does not run."""
    return bool(cfg.arch or cfg.layout or (cfg.model and cfg.model.lower() not in _NAMED_MODELS
                                           and cfg.params is None and cfg.layers is None))


def _planner_job(cfg: AdviseConfig, profile):
    from gpucomm import models
    from gpucomm.advisor import layout, timing

    if cfg.arch and cfg.model:
        raise layout.LayoutError("--arch and --model: give one of them")
    if cfg.arch:
        arch = layout.parse_arch(cfg.arch)
    elif cfg.model:
        arch = models.get(cfg.model)
    else:
        raise layout.LayoutError("--layout needs a model: give --model NAME or --arch layers=..,hidden=..,heads=..")
    if cfg.kernels not in timing.KERNELS:
        raise layout.LayoutError(f"--kernels {cfg.kernels!r}: expected one of {'|'.join(timing.KERNELS)}; "
                                 f"e.g. --kernels unfused for a stack without flash attention")
    from gpucomm.advisor.job import Job
    from gpucomm.advisor.precision import Precision

    dtype = "bf16" if cfg.dtype == "bf16-autocast" else cfg.dtype
    precision = Precision(compute=dtype, weights=cfg.weights, optimizer=cfg.optimizer)
    seq = cfg.seq_len or arch.seq
    gpus = cfg.gpus * cfg.nodes
    batch = cfg.global_batch
    if batch is None:
        batch = gpus * max(1, round(2**21 / (seq * gpus)))
    efficiency, how = _calibrated_efficiency(profile)
    job = Job(arch=arch, profile=profile, nodes=cfg.nodes, gpus_per_node=cfg.gpus, global_batch=batch,
              seq=seq, precision=precision, efficiency=efficiency, kernels=cfg.kernels, loss=cfg.loss)
    return job, how


def _calibrated_efficiency(profile) -> tuple[float | None, str]:
    """The GEMM efficiency that reproduces the user's measured ``single`` steps, when calibrated.

    For every calibrated model that is a preset of :mod:`gpucomm.models`, the planner predicts one GPU's
    step at each measured batch with the default efficiency; the efficiency is then scaled by predicted /
    measured (the planner's time is close to inversely proportional to it), and the median over the points
    is used.  Memory-bound work and the size factor stay modelled, so the calibrated figure carries to other
    shapes and layouts.
    """
    from gpucomm import models
    from gpucomm.advisor import layout, timing

    compute = (profile.calibration or {}).get("compute") or {}
    base = profile.gemm_efficiency or timing.GEMM_EFFICIENCY
    ratios = []
    for name, fit in (compute.get("models") or {}).items():
        arch = models.ARCHITECTURES.get(name)
        if arch is None or profile.peak_flops("bf16") is None or not profile.memory_bw_gbps:
            continue
        for batch, step_s in fit.get("points") or []:
            batch = int(batch)
            seq = fit.get("seq_len") or arch.seq
            t = timing.step_time(arch, layout.Layout(mb=batch), profile, global_batch=batch, seq=seq,
                                 gpus_per_node=1, efficiency=base)
            if step_s > 0:
                ratios.append(t.step_s / step_s)
    if not ratios:
        return None, ""
    ratios.sort()
    eff = min(1.0, base * ratios[len(ratios) // 2])
    return eff, (f"GEMM efficiency {eff:.2f} of peak, calibrated on {len(ratios)} measured single-GPU steps "
                 f"(train records)")


def _planner_assumptions(job, how: str) -> list[str]:
    from gpucomm.advisor import memory, timing

    p = job.profile
    gemm = how or (f"GEMM efficiency {p.gemm_efficiency or timing.GEMM_EFFICIENCY:.2f} of peak "
                   f"({p.sources.get('gemm_efficiency', 'default')})")
    return [gemm + " x a size factor for narrow GEMMs and short micro-batches",
            (f"flash attention at {p.attention_efficiency or timing.ATTENTION_EFFICIENCY:.2f} of peak, fused "
             f"elementwise kernels (--kernels fused)" if job.kernels == "fused" else
             "unfused kernels (--kernels unfused): s x s scores materialised, the whole square computed, one "
             "memory pass per elementwise op as in Megatron-LM 2019, the loss at "
             f"{timing.LOSS_BYTES_PER_LOGIT_UNFUSED:.0f} B per logit"),
            f"memory outside PyTorch {memory.RUNTIME_BYTES / 2**30:.0f} GiB (CUDA context, NCCL) and the allocator's "
            f"reserved margin {memory.ALLOCATOR_MARGIN_BYTES / 2**30:.0f} GiB are assumed",
            f"{job.precision.label()}; loss {job.loss} (--loss)",
            f"capacity {p.memory_bytes / 2**30:.2f} GiB per GPU: {p.sources.get('memory_bytes', '')}",
            f"global batch {job.global_batch} x {job.seq} tokens"]


def _plan_rows(plans, job, profile) -> list[Any]:
    from gpucomm.records import AdviceRecord

    rows = []
    for p in plans:
        t, m = p.time, p.memory
        tokens = p.tokens_per_s_per_gpu * job.gpus
        rows.append(AdviceRecord(
            strategy=_scheme(p.layout), hardware=profile.name, nodes=job.nodes, gpus_per_node=job.gpus_per_node,
            model=job.arch.name, params=job.arch.params(), global_batch=job.global_batch, seq_len=job.seq,
            step_time_s=t.step_s, samples_per_s=tokens / job.seq, scaling_efficiency=None,
            memory_per_gpu_bytes=int(m.total), memory_capacity_bytes=int(p.capacity or 0), fits=p.fits,
            comm_share=min(1.0, t.exposed_comm_s / t.step_s), rank=p.rank, reason=p.reason,
            calibrated=profile.calibrated, tokens_per_s=tokens, compute_s=t.compute_s, comm_s=t.comm_s,
            layout=p.layout.as_dict(), tokens_per_s_per_gpu=p.tokens_per_s_per_gpu, mfu=p.mfu,
            exposed_comm_s=t.exposed_comm_s, bubble_s=t.bubble_s, memory_params_bytes=int(m.params),
            memory_grads_bytes=int(m.grads), memory_optimizer_bytes=int(m.optimizer),
            memory_activations_bytes=int(m.activations), memory_logits_bytes=int(m.loss),
            memory_autocast_bytes=int(m.autocast), memory_buffers_bytes=int(m.buffers),
            memory_margin_bytes=int(m.margin), memory_reserve_bytes=int(m.runtime),
            memory_allocated_bytes=int(m.allocated), memory_reserved_bytes=int(m.reserved)))
    return rows


def _scheme(lo) -> str:
    """A planner row's strategy name: its data-parallel scheme ("single", "ddp", "zero1" … "hsdp")."""
    if lo.shard != "none":
        return lo.shard
    return "ddp" if lo.dp * lo.cp > 1 else "single"


def _run_planner(cfg: AdviseConfig, profile) -> int:
    from gpucomm.advisor import layout, search

    try:
        job, how = _planner_job(cfg, profile)
        fixed = layout.parse_layout(cfg.layout)
        plans = search.search(job, fixed, top=cfg.top)
    except ValueError as exc:
        return _usage(str(exc))
    if cfg.scale:
        return _usage("--scale: predicts named strategies only; drop --layout/--arch or --scale")
    return _emit(cfg, _plan_rows(plans, job, profile), [], _planner_assumptions(job, how), profile)
