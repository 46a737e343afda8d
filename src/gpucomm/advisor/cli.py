"""``gpucomm advise``: how to train a model on given hardware — layout, step time, memory — predicted and explained.

Usage::

    gpucomm advise --model llama3-8b --hardware h100-nvswitch --gpus 8 --global-batch 16
    gpucomm advise --model gpt-124m --hardware h200-nvswitch --gpus 8 --global-batch 256
    gpucomm advise --model llama3-70b --hardware a100-nvlink3 --nodes 8 --layout shard=fsdp,ac=full
    gpucomm advise --arch layers=24,hidden=2048,heads=16 --hardware h100-nvswitch --nodes 4
    gpucomm advise --model gpt-350m --hardware h200-nvswitch --scale --max-gpus 16384
    gpucomm advise --calibrate RESULTS_DIR --save-profile my.json
    gpucomm advise --profile my.json --gpus 2 --model gpt-tiny --global-batch 32

One model prices every way to train: a layout says how tensor, pipeline, context and data parallel split the
GPUs (``tp``, ``pp`` with its ``stages=`` and virtual stages ``vpp``, ``cp``, ``dp``), how data parallel shards
(``shard=none|zero1|zero2|zero3|fsdp|hsdp``, ``reshard=fwd|bwd|step``), the micro-batch ``mb``, activation
checkpointing ``ac=none|selective|op|full``, overlap (``tp_overlap=0|1``, ``ag_overlap=0|1``) and the process
model (``wrapper=ddp|replicated|dataparallel|none``).  Memory is what PyTorch holds (allocated, and reserved
with the allocator's margin); time is compute, communication as each stack overlaps it, pipeline bubble and
the wrapper's host cost.

Two kinds of answer:

* **a search** (``--arch``, ``--layout``, or any model ``gpucomm train`` does not run): every layout the GPUs
  allow, ``--layout`` keys fixed, the rest searched; the ``--top`` fastest are shown;
* **the named strategies** (``--strategies``; the default for gpt-tiny, gpt-124m, gpt-350m and ``--params``):
  single, dp (DataParallel), replicated, ddp, zero1-3 and fsdp as ``gpucomm train`` runs them, each a preset
  layout (data parallel over every GPU, ``global_batch / GPUs`` sequences each).  ``--scale`` adds them at
  1, 2, 4 ... ``--max-gpus`` GPUs, per-GPU batch fixed.

Rows are ranked by predicted step time, except that the recommendation is the simplest row within 5% of the
fastest (a smaller gain is below the model's accuracy).  Rows that do not fit are shown last, marked; rows
that do not apply to the profile (DataParallel on CPU, a wrapper across machines, a collective the profile
has no figure for) are left out, each with its reason.  The output ends with the answer: the recommendation
and the number that decides it.

Software keys, with their defaults: ``--dtype bf16`` (16-bit compute; fp32 on a CPU profile) over
``--weights fp32`` (autocast; use
``--weights bf16`` for 16-bit weights with an fp32 master, ZeRO's and Megatron's); ``--loss upcast``
(``F.cross_entropy`` on fp32 logits; ``fused`` for a fused or chunked loss); ``--kernels fused`` (flash
attention; ``unfused`` is Megatron-LM 2019's stack); ``--optimizer adam``; ``--software eager`` (the stack a
measured compute profile prices: plain PyTorch; ``compiled`` needs a profile measured under torch.compile;
``fused`` is Megatron-Core / Transformer Engine kernels, derived from an eager profile).

Compute: from a profile measured by ``gpucomm measure`` where there is one — ``--compute-profile FILE`` (checked
against ``--hardware``: a profile of another GPU is a usage error), else the one shipped for the H200 or derived
from it for the H100 SXM — and from the datasheet otherwise, said in the answer ("compute not measured").
A step an eager host paces takes the host's time, and hosts differ (one step ran 102 and 173 ms on two H200
machines): ``--host profile`` (default) prices the host that measured the profile, ``--host this`` times again
on this machine's GPU (the profile's model, or for the derived H100 SXM an H100 80GB HBM3; five rounds, each
step timed for at least 0.3 s; the answer says how long it took) what priced the profile's host — its whole ``op`` steps of 2 and 8 layers — and prices this
host's marginal time a layer, for every checkpointing mode.

Hardware: ``--list-hardware`` prints every profile and network with its figures and their public sources.
``--calibrate DIR...`` fits a profile from ``gpucomm bench`` and ``gpucomm train`` records (collectives as
measured, compute from measured steps, each wrapper's host cost) and says how well it reproduces them;
``--save-profile`` writes it, ``--profile`` reads it back.

``--json`` prints ``{"advice": [rows, best first], "left_out": [...], "scale": [...], "answer": [...]}``: each
row has ``layout`` (every key), ``step_time_s``, ``tokens_per_s_per_gpu``, the ``memory_*_bytes`` terms with
``memory_allocated_bytes`` and ``memory_reserved_bytes``, ``fits``, ``mfu`` and ``reason``.  ``--out`` writes
the rows, and the answer, as records for ``gpucomm report``: into a new
``gpucomm-results/advise-<UTC yyyymmdd-hhmmss>-<pid>/`` (``--out`` alone, or a DIR that holds result
directories, such as ``gpucomm-results``), else into DIR; made only once the answer is ready.

Exit status: 0 ok; 2 usage error — one line naming the flag or key, the value, the rule and a fix (unknown
hardware, model, network or layout key, a stage split that does not sum to the layers, a virtual-stage count
that does not divide a stage, a batch that does not divide, unusable records or profile, an unwritable path).
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass, field
from typing import Any

__all__ = ["LIMITS", "AdviseConfig", "add_parser", "config_from_args", "run"]

LIMITS = {"gpus": 1 << 20, "global_batch": 1 << 40, "params": 1e15}  # gpus: answer.LIMIT_GPUS
"""What ``advise`` answers: up to 2^20 GPUs, a global batch of 2^40 sequences, 10^15 parameters (bounded
work: the search visits divisors, never every value)."""


@dataclass(kw_only=True, slots=True)
class AdviseConfig:
    """Parsed ``gpucomm advise`` flags (see the module docstring)."""

    hardware: str | None = None
    network: str | None = None
    profile: str | None = None
    calibrate: list[str] = field(default_factory=list)
    save_profile: str | None = None
    gpus: int | None = None
    """Per machine; None = the profile's full machine."""
    nodes: int = 1
    model: str | None = None
    arch: str | None = None
    layout: str | None = None
    params: float | None = None
    layers: int | None = None
    d_model: int | None = None
    global_batch: int | None = None
    seq_len: int | None = None
    dtype: str | None = None
    """None: bf16 on a GPU profile, fp32 on a CPU one."""
    weights: str = "fp32"
    optimizer: str = "adam"
    loss: str = "upcast"
    kernels: str = "fused"
    software: str = "eager"
    compute_profile: str | None = None
    host: str = "profile"
    strategies: tuple[str, ...] | None = None
    top: int = 10
    scale: bool = False
    max_gpus: int = 4096
    json: bool = False
    out: str | None = None
    """The result directory (``--out``; "" = a new one, :func:`gpucomm.records.run_dir_for`); None: no records."""

    def __post_init__(self) -> None:
        for flag, v, lo, hi in (("--gpus", self.gpus, 1, LIMITS["gpus"]), ("--nodes", self.nodes, 1, LIMITS["gpus"]),
                                ("--global-batch", self.global_batch, 1, LIMITS["global_batch"]),
                                ("--seq-len", self.seq_len, 1, 1 << 24), ("--top", self.top, 1, 10_000),
                                ("--max-gpus", self.max_gpus, 1, LIMITS["gpus"]),
                                ("--layers", self.layers, 1, 100_000), ("--d-model", self.d_model, 1, 10_000_000)):
            if v is not None and not lo <= v <= hi:
                raise ValueError(f"{flag} {v}: expected {lo} to {hi:,}; give a value in that range")
        if (self.gpus or 1) * self.nodes > LIMITS["gpus"]:
            raise ValueError(f"--nodes x --gpus = {(self.gpus or 1) * self.nodes:,}: the advisor answers up to "
                             f"{LIMITS['gpus']:,} GPUs; give fewer")
        if self.params is not None and not (math.isfinite(self.params) and 1 <= self.params <= LIMITS["params"]):
            raise ValueError(f"--params {self.params:g}: expected a count from 1 to {LIMITS['params']:.0e}; "
                             f"e.g. --params 7e9")
        if (self.layers is None) != (self.d_model is None):
            raise ValueError("--layers and --d-model go together; give both (a GPT of that depth and width)")


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``advise``; its help is this module's docstring."""
    p = subparsers.add_parser("advise", help="predict and rank how to train a model on given hardware",
                              description=__doc__)
    hw = p.add_argument_group("hardware")
    hw.add_argument("--hardware", help="a profile, e.g. h200-nvswitch (see --list-hardware)")
    hw.add_argument("--list-hardware", action="store_true",
                    help="print every profile and network with its figures and sources, then exit")
    hw.add_argument("--network", help="network between machines, e.g. ib-ndr400x8 (see --list-hardware)")
    hw.add_argument("--profile", help="a calibrated profile saved with --save-profile")
    hw.add_argument("--calibrate", nargs="+", default=[], metavar="DIR",
                    help="fit the profile from bench/train records in these directories")
    hw.add_argument("--save-profile", metavar="PATH", help="write the (calibrated) profile as JSON")
    hw.add_argument("--gpus", type=int, help="GPUs (or CPU devices) per machine (default: a full machine)")
    hw.add_argument("--nodes", type=int, default=1, help="machines (default 1)")
    wl = p.add_argument_group("workload")
    wl.add_argument("--model", help="a preset: gpt-tiny, gpt-124m, gpt-350m, llama2-7b/13b/70b, "
                                    "llama3-8b/70b/405b, gpt3-175b")
    wl.add_argument("--arch", help="a shape: layers=..,hidden=..,heads=..[,kv_heads=..,ffn=..,"
                                   "ffn_kind=gelu-4h|swiglu,vocab=..,seq=..,tied=0|1,dropout=0|1]")
    wl.add_argument("--params", type=float, help="a parameter count, e.g. 7e9: a GPT-3-family shape of that size")
    wl.add_argument("--layers", type=int, help="a GPT of this depth (with --d-model)")
    wl.add_argument("--d-model", type=int, help="a GPT of this width (with --layers)")
    wl.add_argument("--layout", help="layout keys to fix, e.g. tp=8,pp=4,stages=7+9+9+7,shard=fsdp,mb=1,ac=full")
    wl.add_argument("--global-batch", type=int,
                    help="sequences per optimizer step (default: 256 for named strategies, else about 2M tokens)")
    wl.add_argument("--seq-len", type=int, help="tokens per sequence (default: the model's context)")
    wl.add_argument("--dtype", help="compute dtype: bf16 (default on GPUs), fp16 or fp32 (default on CPUs)")
    wl.add_argument("--weights", default="fp32",
                    help="weight storage: fp32 (default; autocast) or bf16/fp16 (16-bit, fp32 master)")
    wl.add_argument("--optimizer", default="adam", help="adam (default) or sgd")
    wl.add_argument("--loss", default="upcast", help="cross-entropy: upcast (default, fp32 logits) or fused")
    wl.add_argument("--kernels", default="fused", help="fused (default: flash attention) or unfused")
    wl.add_argument("--software", default="eager",
                    help="eager (default: plain PyTorch), compiled or fused (Megatron/TE kernels, derived)")
    hw.add_argument("--compute-profile", metavar="FILE",
                    help="a compute profile measured by gpucomm measure on this GPU (default: the shipped one)")
    hw.add_argument("--host", default="profile",
                    help="whose host paces an eager step: profile (default: the machine that measured the compute "
                         "profile) or this (time the profile's host-paced op steps again on this machine's GPU, the "
                         "profile's model or the one derived from it, "
                         "its answer says how long it took)")
    out = p.add_argument_group("output")
    out.add_argument("--strategies", help="named strategies to price, comma-separated: single, dp, replicated, "
                                          "ddp, zero1, zero2, zero3, fsdp")
    out.add_argument("--top", type=int, default=10, help="search: layouts to show (default 10)")
    out.add_argument("--scale", action="store_true", help="also price the named strategies from 1 GPU up")
    out.add_argument("--max-gpus", type=int, default=4096, help="largest GPU count --scale prices (default 4096)")
    out.add_argument("--json", action="store_true", help="print JSON instead of tables")
    out.add_argument("--out", metavar="DIR", nargs="?", const="",
                     help="write the rows and the answer as records (and the scale plot) into DIR; --out alone: "
                          "a new gpucomm-results/advise-<UTC time>-<pid>/")
    return p


def config_from_args(args: argparse.Namespace) -> AdviseConfig:
    """Typed config from parsed flags; raises ValueError on bad values."""
    from gpucomm.advisor.layout import STRATEGIES

    strategies = None
    if args.strategies is not None:
        strategies = tuple(s.strip() for s in args.strategies.split(",") if s.strip())
        bad = [s for s in strategies if s not in STRATEGIES]
        if bad or not strategies:
            raise ValueError(f"--strategies {args.strategies!r}: expected a comma list of {', '.join(STRATEGIES)}")
    keys = ("hardware", "network", "profile", "save_profile", "gpus", "nodes", "model", "arch", "layout", "params",
            "layers", "d_model", "global_batch", "seq_len", "dtype", "weights", "optimizer", "loss", "kernels", "software",
            "compute_profile", "host", "top",
            "scale", "max_gpus", "json", "out")
    cfg = AdviseConfig(calibrate=list(args.calibrate), strategies=strategies, **{k: getattr(args, k) for k in keys})
    if not (cfg.hardware or cfg.profile or cfg.calibrate):
        raise ValueError("give --hardware NAME (see --list-hardware), --profile PATH or --calibrate DIR")
    return cfg


def _usage(msg: str) -> int:
    print(f"gpucomm advise: error: {msg}", file=sys.stderr)
    return 2


def run(args: argparse.Namespace) -> int:
    """Run ``gpucomm advise``; returns the exit status."""
    if getattr(args, "list_hardware", False):
        import textwrap

        from gpucomm._console import console_width
        from gpucomm.advisor import hardware

        width = console_width()
        for line in hardware.describe():  # wrapped to the terminal (or COLUMNS), continuations indented
            indent = " " * (len(line) - len(line.lstrip(" ")))
            print("\n".join(textwrap.wrap(line, width, subsequent_indent=indent + "    ", break_on_hyphens=False,
                                           break_long_words=False) or [""]))
        return 0
    from gpucomm.advisor import answer, render
    from gpucomm.records import RecordError

    try:
        cfg = config_from_args(args)
        if cfg.out is not None:
            from gpucomm.records import out_problem, run_dir_for

            cfg.out = str(run_dir_for("advise", cfg.out, create=False))  # made when the records are written
            bad = out_problem(cfg.out)
            if bad:
                return _usage(f"--out {cfg.out!r}: {bad}")
        profile, results = answer.resolve_profile(cfg)
        if cfg.model is None and cfg.arch is None and cfg.params is None and cfg.layers is None:
            if not (cfg.calibrate or cfg.save_profile):
                return _usage("give --model NAME (or --arch, --params, --layers/--d-model)")
            result = None
        else:
            result = answer.advise(cfg, profile)
    except (ValueError, RecordError, OSError) as exc:
        return _usage(str(exc))
    if cfg.save_profile:
        from gpucomm.advisor import calibrate

        try:
            calibrate.save_profile(profile, cfg.save_profile)
        except OSError as exc:
            return _usage(f"--save-profile {cfg.save_profile!r}: cannot write ({exc.strerror or exc}); "
                          f"give a path in a writable directory")
    if result is None:
        render.print_calibration_of(cfg, profile, results)
        return 0
    return render.emit(cfg, result)
