"""What ``gpucomm advise`` computes for a config: the profile, the job, the rows (a search or the named
strategies), the rows left out with their reasons, the scaling curve, and the assumptions behind them.

:mod:`gpucomm.advisor.cli` parses; this module decides; :mod:`gpucomm.advisor.render` prints and writes.  Nothing here
imports torch.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from dataclasses import dataclass, field
from typing import Any

from gpucomm import models
from gpucomm.advisor import calibrate, compute, hardware, layout, measured, search, timing, wrappers
from gpucomm.advisor.compute import source_for
from gpucomm.advisor.hardware import HardwareProfile
from gpucomm.advisor.job import Job
from gpucomm.advisor.precision import Precision

__all__ = ["Advice", "ScalePoint", "advise", "architecture", "make_job", "resolve_profile", "synthetic_gpt"]

DEFAULT_NAMED_BATCH = 256
"""Sequences per step for the named strategies when --global-batch is not given (at least one per GPU, a
multiple of the GPU count)."""
SEARCH_TOKENS = 2**21
"""About 2M tokens per step for a search when --global-batch is not given (a multiple of the GPU count)."""
LIMIT_GPUS = 1 << 20
"""The most GPUs ``advise`` answers for (the search visits divisors of the count: bounded work)."""
GPT3_WIDTH_PER_LAYER = 128
"""``--params N`` shape: hidden = 128 x layers, head dim 128 — the GPT-3 family's aspect ratio for its 6.7B to
175B models (Brown et al. 2020, Table 2.1: 4096/32, 5140/40, 12288/96), so ``12 L h^2 = N`` gives
``L = (N / 196608)^(1/3)``."""


@dataclass(kw_only=True, slots=True)
class ScalePoint:
    """One named strategy at one GPU count (weak scaling: per-GPU batch fixed)."""

    strategy: str
    gpus: int
    nodes: int
    step_s: float
    samples_per_s: float
    efficiency: float
    fits: bool


@dataclass(kw_only=True, slots=True)
class Advice:
    """Everything one ``advise`` answers."""

    job: Job
    plans: list[search.Plan]
    names: dict[int, str]
    """Row name by ``id(plan)``: the named strategy, or the layout's data-parallel scheme for a search."""
    left_out: list[tuple[str, str]] = field(default_factory=list)
    """(name, reason) of rows that do not apply to this profile."""
    scale: list[ScalePoint] = field(default_factory=list)
    assumptions: list[str] = field(default_factory=list)
    named: bool = False


def resolve_profile(cfg: Any) -> tuple[HardwareProfile, Any]:
    """The profile the config names (datasheet, saved or calibrated now), with its network and GPU count set
    on ``cfg``; and the records it was calibrated from (or None)."""
    from gpucomm import records

    results = None
    if cfg.calibrate:
        results = records.load(*cfg.calibrate)
        label = f"{len(cfg.calibrate)} result director{'y' if len(cfg.calibrate) == 1 else 'ies'}"
        profile = calibrate.calibrate(results, cfg.hardware, label=label)
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
            raise ValueError(f"--network {cfg.network!r}: no such network; known: "
                             f"{', '.join(sorted(hardware.NETWORKS))}")
        profile = hardware.with_network(profile, link)
    if cfg.gpus is None:
        cfg.gpus = profile.max_gpus_per_node
    if cfg.gpus > profile.max_gpus_per_node:
        raise ValueError(f"--gpus {cfg.gpus}: {profile.name} machines hold at most {profile.max_gpus_per_node} "
                         f"GPUs; use --nodes for more machines")
    if cfg.gpus * cfg.nodes > LIMIT_GPUS:
        raise ValueError(f"--nodes x --gpus = {cfg.gpus * cfg.nodes:,}: the advisor answers up to {LIMIT_GPUS:,} "
                         f"GPUs; give fewer")
    if cfg.nodes > 1 and profile.inter is None:
        raise ValueError(f"--nodes {cfg.nodes}: profile {profile.name!r} has no network between machines; "
                         f"pass --network")
    return profile, results


def synthetic_gpt(params: float, seq: int) -> models.Architecture:
    """A GPT of about ``params`` parameters with the GPT-3 family's shape (:data:`GPT3_WIDTH_PER_LAYER`)."""
    layers = max(1, round((params / (12 * GPT3_WIDTH_PER_LAYER**2)) ** (1 / 3)))
    hidden = GPT3_WIDTH_PER_LAYER * layers
    return models.Architecture(name=f"gpt-shape-{params:.3g}", layers=layers, hidden=hidden, heads=layers,
                               kv_heads=layers, ffn_hidden=4 * hidden, ffn_kind="gelu-4h", vocab=50304, seq=seq,
                               tied_embeddings=True, learned_positions=False, biases=True,
                               source=f"--params {params:.3g}: GPT-3-family shape, hidden = 128 x layers")


def architecture(cfg: Any) -> models.Architecture:
    """The model the config describes (``--model``, ``--arch``, ``--layers/--d-model`` or ``--params``)."""
    given = [f for f, v in (("--model", cfg.model), ("--arch", cfg.arch), ("--params", cfg.params),
                            ("--layers/--d-model", cfg.layers)) if v is not None]
    if len(given) > 1:
        raise ValueError(f"{' and '.join(given)}: give one way to describe the model")
    if cfg.arch:
        return layout.parse_arch(cfg.arch)
    if cfg.model:
        arch = models.ARCHITECTURES.get(cfg.model.lower())
        if arch is None:
            raise ValueError(f"--model {cfg.model!r}: no such model; valid names are {', '.join(models.names())} "
                             f"(or describe one with --arch, --params or --layers/--d-model)")
        return arch
    if cfg.layers is not None:
        d = cfg.d_model
        heads = d // 64 if d % 64 == 0 else 1
        return models.Architecture(name=f"gpt-L{cfg.layers}-d{d}", layers=cfg.layers, hidden=d, heads=heads,
                                   kv_heads=heads, ffn_hidden=4 * d, ffn_kind="gelu-4h", vocab=50304,
                                   seq=cfg.seq_len or 1024, tied_embeddings=True, learned_positions=True,
                                   biases=True, source="--layers/--d-model: gpucomm.train's GPT family")
    return synthetic_gpt(cfg.params, cfg.seq_len or 2048)


TRAIN_MODELS = ("gpt-tiny", "gpt-124m", "gpt-350m")
"""Models ``gpucomm train`` runs: their default answer is the named strategies."""


def _named(cfg: Any) -> bool:
    """Whether the answer is the named strategies (else a search): asked for, or the default for the models
    ``gpucomm train`` runs and for shapes given by size only."""
    return bool(cfg.strategies) or (not cfg.layout and not cfg.arch and (
        (cfg.model or "").lower() in TRAIN_MODELS or cfg.params is not None or cfg.layers is not None))


def make_job(cfg: Any, profile: HardwareProfile, arch: models.Architecture, gpus_per_node: int, nodes: int,
             global_batch: int) -> Job:
    """The job of ``cfg`` on ``nodes`` x ``gpus_per_node`` devices of ``profile``."""
    seq = cfg.seq_len or arch.seq
    if arch.learned_positions and seq > arch.seq:
        arch = dataclasses.replace(arch, seq=seq)  # the position table spans the sequence
    return Job(arch=arch, profile=profile, nodes=nodes, gpus_per_node=gpus_per_node, global_batch=global_batch,
               seq=seq, precision=Precision(compute=cfg.dtype or ("fp32" if profile.kind == "cpu-gloo" else "bf16"),
                                            weights=cfg.weights, optimizer=cfg.optimizer),
               kernels=cfg.kernels, loss=cfg.loss, efficiency=None,
               colocated=calibrate.colocated(profile, gpus_per_node), software=cfg.software,
               compute_profile=cfg.compute_profile, host=getattr(cfg, "host", "profile"))


def _not_applicable(profile: HardwareProfile, lo: layout.Layout) -> str:
    if lo.wrap == "dataparallel" and profile.kind == "cpu-gloo":
        return "DataParallel needs CUDA devices; this profile is a CPU's"
    return ""


def _named_rows(job: Job, strategies: tuple[str, ...]) -> tuple[list[search.Plan], dict[int, str],
                                                                 list[tuple[str, str]]]:
    plans, names, left = [], {}, []
    for s in strategies:
        try:
            lo = layout.preset(s, job.gpus, job.global_batch)
        except layout.LayoutError as exc:
            left.append((s, str(exc)))
            continue
        why = _not_applicable(job.profile, lo)
        if s == "single" and job.gpus > 1:
            why = f"single runs on one device, not {job.gpus}"
        if why:
            left.append((s, why))
            continue
        try:
            plan = search.evaluate(job, lo)
        except (ValueError, timing.CollectiveUnknown) as exc:
            left.append((s, str(exc).removeprefix("--layout ")))
            continue
        plans.append(plan)
        names[id(plan)] = s
    return plans, names, left


def _default_strategies(gpus: int) -> tuple[str, ...]:
    rest = ("dp", "replicated", "ddp", "zero1", "zero2", "zero3", "fsdp")
    return ("single", *rest) if gpus == 1 else rest


def advise(cfg: Any, profile: HardwareProfile) -> Advice:
    """Rows, left-out rows, scaling and assumptions for ``cfg`` on ``profile`` (module docstring)."""
    arch = architecture(cfg)
    named = _named(cfg)
    gpus = cfg.gpus * cfg.nodes
    seq = cfg.seq_len or arch.seq
    per_gpu = DEFAULT_NAMED_BATCH / gpus if named else SEARCH_TOKENS / (seq * gpus)
    batch = cfg.global_batch or gpus * max(1, round(per_gpu))
    job = make_job(cfg, profile, arch, cfg.gpus, cfg.nodes, batch)
    compute.check(job)  # a compute profile that cannot price this job (another GPU, a corrupt file): exit 2
    if named:
        if batch % gpus:
            raise ValueError(f"--global-batch {batch}: must divide over the {gpus} GPUs (--nodes x --gpus) for the "
                             f"named strategies; use a multiple of {gpus}, e.g. {gpus * max(1, round(batch / gpus))}")
        strategies = cfg.strategies or _default_strategies(gpus)
        plans, names, left = _named_rows(job, strategies)
        plans = search.rank(search.distinct(plans, names), top=len(plans))
    else:
        if cfg.scale:
            raise ValueError("--scale: prices the named strategies; drop --layout/--arch, or give --strategies")
        plans = search.search(job, layout.parse_layout(cfg.layout), top=cfg.top)
        names = {id(p): _scheme(p.layout) for p in plans}
        left = []
    advice = Advice(job=job, plans=plans, names=names, left_out=left, named=named)
    if cfg.scale:
        advice.scale = scale(cfg, profile, arch, strategies, batch / gpus)
    advice.assumptions = assumptions(job, plans)
    return advice


def _scheme(lo: layout.Layout) -> str:
    """A searched row's name: its data-parallel scheme ("single", "ddp", "zero1" ... "hsdp")."""
    if lo.shard != "none":
        return lo.shard
    return {"none": "single", "dataparallel": "dp"}.get(lo.wrap, lo.wrap)


def scale(cfg: Any, profile: HardwareProfile, arch: models.Architecture, strategies: tuple[str, ...],
          per_gpu_batch: float) -> list[ScalePoint]:
    """The named strategies at 1, 2, 4 ... ``cfg.max_gpus`` GPUs, per-GPU batch fixed (machines of the profile's
    size beyond one; a profile without a network stops at one machine).  Scaling efficiency: throughput over
    GPUs x one GPU's at the same per-GPU batch."""
    top = cfg.max_gpus if profile.inter is not None else min(cfg.max_gpus, profile.max_gpus_per_node)
    mb = max(1, round(per_gpu_batch))
    one = make_job(cfg, profile, arch, 1, 1, mb)
    base = search.evaluate(one, layout.preset("single", 1, mb)).time.step_s
    out = []
    gpus = 1
    while gpus <= top:
        g = min(gpus, profile.max_gpus_per_node)
        m = math.ceil(gpus / g)
        job = make_job(cfg, profile, arch, g, m, mb * g * m)
        plans, names, _ = _named_rows(job, tuple(s for s in strategies if s != "single"))
        for p in plans:
            sps = job.global_batch / p.time.step_s
            out.append(ScalePoint(strategy=names[id(p)], gpus=g * m, nodes=m, step_s=p.time.step_s, samples_per_s=sps,
                                  efficiency=sps / (g * m * mb / base), fits=p.fits))
        gpus *= 2
    return out


def assumptions(job: Job, plans: list[search.Plan]) -> list[str]:
    """What the numbers rest on that was not measured, or where it was measured (one line each)."""
    p = job.profile
    lines = []
    fit = measured.model_fit(job)
    if fit is not None:
        lines.append(f"compute of {job.arch.name} from {len(fit['points'])} measured single-device steps "
                     f"(train records); other layouts from the datasheet model")
    elif p.peak_flops(job.dtype) is not None:
        lines += source_for(job).assumptions(job)
    lines.append(f"{job.precision.label()}; loss {job.loss} (--loss); kernels {job.kernels} (--kernels)")
    if (p.calibration or {}).get("comm_in_wrapper"):
        lines.append("no bench records: each wrapper's communication is inside its cost fitted from train records, "
                     "so it holds at the device counts measured (add gpucomm bench records to price others)")
    if p.memory_bytes is not None:
        from gpucomm.advisor import memory

        margin = (f"the allocator's reserved margin {memory.ALLOCATOR_MARGIN_BYTES / 2**30:.0f} GiB are assumed"
                  if not plans or source_for(job).margin_bytes(job, plans[0].layout) is None else
                  "the allocator's reserved margin is measured (whole steps of the compute profile)")
        lines.append(f"memory outside PyTorch {memory.RUNTIME_BYTES / 2**30:.0f} GiB is assumed and {margin}; capacity "
                     f"{p.memory_bytes / 2**30:.2f} GiB per GPU: {p.sources.get('memory_bytes', '')}")
    else:
        lines.append("no device memory capacity in this profile: every row fits")
    for plan in plans:
        note = wrappers.cost(p, plan.layout).note
        if note and note not in lines:
            lines.append(note)
        for what in plan.time.extrapolated if plan.time else ():
            line = f"extrapolated beyond the measured compute profile: {what}"
            if line not in lines:
                lines.append(line)
    if job.arch.source.startswith("--params"):
        lines.append(f"model shape from {job.arch.source}: {job.arch.layers} layers x {job.arch.hidden}, "
                     f"{job.arch.params():,} parameters")
    lines.append(f"global batch {job.global_batch} x {job.seq} tokens")
    return lines
