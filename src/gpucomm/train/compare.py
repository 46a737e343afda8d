"""Run every strategy on one workload, check each against ``single``, and turn the runs into records.

:func:`run_comparison` is the library form of ``gpucomm train``::

    from gpucomm.train import TrainConfig, run_comparison
    cmp = run_comparison(TrainConfig(strategies=("single", "replicated", "ddp"), model="gpt-tiny",
                                     steps=5, warmup_steps=1, global_batch=8, devices=["cpu", "cpu"]))
    for r in cmp.records: print(r.strategy, r.losses[-1], r.equal_to_single)

Equality (:func:`compare_runs`): per step, ``|loss - loss_single| / |loss_single|``; at the end, over
all parameters at once, ``‖θ - θ_single‖₂ / ‖θ_single‖₂``.  A strategy is equal when the worst loss
difference and the parameter difference are both within the tolerance
(:data:`gpucomm.train.config.TOLERANCES`).

.. note::
   The parameter measure is over the whole model, not per tensor, on purpose: some tensors have a
   (near-)zero true gradient — an attention key bias, for one, since softmax ignores a constant shift
   of the scores — so their gradient is rounding noise, which AdamW normalises into real updates.
   Such a tensor's own relative difference is large (1e-4 in fp32 after a few steps) while meaning
   nothing; a genuine bug (a gradient not averaged, a missed bucket) still moves the whole-model
   measure far past 1e-5.  ``worst_param`` names the tensor with the largest own relative difference,
   for diagnosis.

Timing statistics leave out the first ``warmup_steps`` steps; samples/s is the median over timed
steps of ``global_batch / step time``; scaling efficiency is ``samples/s / (n_devices × single's)``.
"""

from __future__ import annotations

import math
import statistics
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch

from gpucomm.records import TrainRecord
from gpucomm.train.config import TOLERANCES, ConfigError, TrainConfig
from gpucomm.train.loop import RunResult, run_strategy
from gpucomm.train.models import Workload, load_workload
from gpucomm.train.strategies import get

__all__ = ["Comparison", "Equality", "compare_runs", "run_comparison", "run_launched", "strategy_devices",
           "under_launcher"]


@dataclass(kw_only=True, slots=True)
class Equality:
    """How one run compares with single's."""

    max_loss_rel_diff: float
    worst_step: int
    """Step index of the largest loss difference."""
    max_param_rel_diff: float
    worst_param: str
    tolerance: float

    @property
    def equal(self) -> bool:
        return self.max_loss_rel_diff <= self.tolerance and self.max_param_rel_diff <= self.tolerance


@dataclass(kw_only=True, slots=True)
class Comparison:
    """The outcome of :func:`run_comparison`."""

    config: TrainConfig
    records: list[TrainRecord] = field(default_factory=list)
    runs: dict[str, RunResult] = field(default_factory=dict)
    equality: dict[str, Equality] = field(default_factory=dict)

    @property
    def failed(self) -> list[TrainRecord]:
        """Rows that failed to run, or (with ``assert_equal``) differ from single."""
        return [r for r in self.records if r.status == "failed"
                or (self.config.assert_equal and r.equal_to_single is False)]


def _rel(a: float, b: float) -> float:
    if a == b:
        return 0.0
    return abs(a - b) / max(abs(b), 1e-12) if math.isfinite(a) and math.isfinite(b) else math.inf


def compare_runs(run: RunResult, reference: RunResult, tolerance: float) -> Equality:
    """Compare a run's per-step losses and final parameters with the reference run's."""
    diffs = [_rel(a, b) for a, b in zip(run.losses, reference.losses, strict=True)]
    worst_step = max(range(len(diffs)), key=diffs.__getitem__)
    if set(run.state) != set(reference.state):
        names = sorted(set(run.state) ^ set(reference.state))[:4]
        return Equality(max_loss_rel_diff=diffs[worst_step], worst_step=worst_step, max_param_rel_diff=math.inf,
                        worst_param=f"parameter names differ: {names}", tolerance=tolerance)
    diff_sq, ref_sq, worst_param, worst = 0.0, 0.0, "", -1.0
    for name, ref in reference.state.items():
        ref64, got64 = ref.double(), run.state[name].double()
        if ref64.shape != got64.shape:
            diff_sq, worst_param, worst = math.inf, name, math.inf
            continue
        d2, r2 = float((got64 - ref64).square().sum()), float(ref64.square().sum())
        diff_sq, ref_sq = diff_sq + d2, ref_sq + r2
        own = math.sqrt(d2 / max(r2, 1e-24))
        if own > worst:
            worst_param, worst = name, own
    total = math.sqrt(diff_sq) / max(math.sqrt(ref_sq), 1e-12) if math.isfinite(diff_sq) else math.inf
    return Equality(max_loss_rel_diff=diffs[worst_step], worst_step=worst_step, max_param_rel_diff=total,
                    worst_param=worst_param, tolerance=tolerance)


def strategy_devices(name: str, config: TrainConfig) -> list[torch.device]:
    """The devices a strategy trains on: single the first, ddp one per rank, the others all of them."""
    if name == "single":
        return config.devices[:1]
    if get(name).per_process:
        return config.ddp_devices()
    return list(config.devices)


def _check_divisible(config: TrainConfig) -> None:
    for name in config.strategies:
        n = len(strategy_devices(name, config))
        if config.global_batch % n:
            raise ConfigError(f"--global-batch {config.global_batch} does not divide by the {n} devices of "
                             f"strategy {name!r}; choose a multiple of {n}")


def _run(name: str, workload: Workload, config: TrainConfig) -> RunResult:
    cls = get(name)
    devices = strategy_devices(name, config)
    if cls.per_process:
        from gpucomm.train.launching import launch_strategy

        return launch_strategy(name, config, len(devices))
    return run_strategy(cls(config, devices), workload, config)


def _stats(run: RunResult, config: TrainConfig) -> dict:
    timed = run.step_ms[config.warmup_steps:]
    sps = statistics.median(config.global_batch * 1e3 / t for t in timed)
    comm = run.comm_ms[config.warmup_steps:] if run.comm_ms else None
    return {"samples_per_s": sps, "step_ms_median": statistics.median(timed),
            "step_ms_p90": float(np.percentile(timed, 90)),
            "comm_ms_median": statistics.median(comm) if comm else None}


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def _notes(run: RunResult, config: TrainConfig, problems: list[str]) -> list[str]:
    notes = []
    if len(set(run.devices)) < len(run.devices) and run.devices[0].startswith("cuda"):
        notes.append(f"devices repeat ({', '.join(run.devices)}): exercises the code paths; "
                     f"the speed is not meaningful")
    if config.device_type == "cpu":
        notes.append("CPU numbers")
    if run.strategy == "replicated" and run.comm_ms:
        notes.append("comm = all-reduce GPU time on the first device's comm stream (overlapped or not)"
                     if config.device_type == "cuda" else "comm = host time inside all-reduce calls")
    if run.strategy == "replicated" and not config.replicated_threads:
        notes.append("replicas run one after another (no threads)")
    notes.extend(problems)
    return notes


def _record(run: RunResult, config: TrainConfig, workload: Workload, single: TrainRecord | None,
            equality: Equality | None) -> TrainRecord:
    stats = _stats(run, config)
    n = len(run.devices)
    # JSON has no NaN/inf: a diverged loss ends the recorded history and fails the row.
    bad = next((i for i, v in enumerate(run.losses) if not math.isfinite(v)), None)
    problems = [*run.problems, *([f"loss is not finite from step {bad} on"] if bad is not None else [])]
    eff = 1.0 if run.strategy == "single" else None
    if single is not None and single.samples_per_s:
        eff = stats["samples_per_s"] / (n * single.samples_per_s)
    return TrainRecord(
        strategy=run.strategy, model=workload.name, n_devices=n, world_size=run.world_size,
        device_type=config.device_type, precision=run.precision, global_batch=config.global_batch,
        seq_len=workload.seq_len, steps=config.steps, warmup_steps=config.warmup_steps,
        status="failed" if problems else "ok", params=run.params,
        tokens_per_s=stats["samples_per_s"] * workload.seq_len if workload.seq_len else None,
        step_ms=run.step_ms, peak_mem_bytes=run.peak_mem_bytes, scaling_efficiency=eff,
        losses=run.losses if bad is None else run.losses[:bad],
        equal_to_single=None if equality is None else equality.equal,
        max_loss_rel_diff=None if equality is None else _finite(equality.max_loss_rel_diff),
        max_param_rel_diff=None if equality is None else _finite(equality.max_param_rel_diff),
        tolerance=None if equality is None else equality.tolerance,
        note="; ".join(_notes(run, config, problems)), devices=list(run.devices), **stats,
    )


def _placeholder(name: str, config: TrainConfig, workload: Workload, status: str, note: str) -> TrainRecord:
    return TrainRecord(strategy=name, model=workload.name, n_devices=len(strategy_devices(name, config)),
                       world_size=1, device_type=config.device_type, precision=config.resolved_precision(
                           workload.autocast), global_batch=config.global_batch, seq_len=workload.seq_len,
                       steps=config.steps, warmup_steps=config.warmup_steps, status=status, note=note,
                       devices=[str(d) for d in strategy_devices(name, config)])


def _tolerance(config: TrainConfig, precision: str) -> float:
    return config.tolerance if config.tolerance is not None else TOLERANCES[precision]


def run_comparison(config: TrainConfig, *, on_record: Callable[[TrainRecord], None] | None = None,
                   on_start: Callable[[str], None] | None = None) -> Comparison:
    """Run ``config.strategies`` (single first) and compare each with single.

    Args:
        config: the comparison.
        on_record: called with each finished row as soon as it exists (e.g. a RecordWriter's ``write``).
        on_start: called with each strategy's name before it runs (progress display).

    Returns:
        a :class:`Comparison`; strategies that cannot run here have status "not-applicable", those that
        raised have status "failed" with the error in ``note`` (the others still run).

    Raises:
        ConfigError: the global batch does not divide by a strategy's device count.
        gpucomm.train.models.ModelError: the model cannot be loaded.
    """
    _check_divisible(config)
    workload = load_workload(config.model, seed=config.seed, seq_len=config.seq_len)
    cmp = Comparison(config=config)
    single: TrainRecord | None = None
    for name in config.strategies:
        if on_start is not None:
            on_start(name)
        record = _one(name, config, workload, cmp, single)
        if name == "single" and record.status == "ok":
            single = record
        cmp.records.append(record)
        if on_record is not None:
            on_record(record)
    return cmp


def _one(name: str, config: TrainConfig, workload: Workload, cmp: Comparison,
         single: TrainRecord | None) -> TrainRecord:
    reason = get(name).not_applicable(config)
    if reason is not None:
        return _placeholder(name, config, workload, "not-applicable", reason)
    try:
        run = _run(name, workload, config)
    except Exception as exc:
        detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        return _placeholder(name, config, workload, "failed", detail)
    cmp.runs[name] = run
    equality = None
    if name != "single" and "single" in cmp.runs:
        equality = compare_runs(run, cmp.runs["single"], _tolerance(config, run.precision))
        cmp.equality[name] = equality
    return _record(run, config, workload, single, equality)


def under_launcher() -> bool:
    """True when torchrun or SLURM started this process as one rank of a multi-process job."""
    import gpucomm.dist as gd

    env = gd.read_env()
    return env.source != "none" and env.world_size > 1


def run_launched(config: TrainConfig, *, on_record: Callable[[TrainRecord], None] | None = None
                 ) -> Comparison | None:
    """Under torchrun/SLURM: run the ``per_process`` strategies of ``config`` (ddp) across the job's ranks.

    Strategies that need every device in one process are not run; there is therefore no single
    baseline, and ``equal_to_single`` and scaling efficiency stay None.  Rank 0 returns the
    comparison, the other ranks None.
    """
    import gpucomm.dist as gd
    from gpucomm.train.launching import run_under_launcher

    world = gd.read_env().world_size
    if config.global_batch % world:
        raise ConfigError(f"--global-batch {config.global_batch} does not divide by the job's {world} ranks; "
                         f"choose a multiple of {world}")
    workload = load_workload(config.model, seed=config.seed, seq_len=config.seq_len)
    cmp = Comparison(config=config)
    for name in (n for n in config.strategies if get(n).per_process):
        run = run_under_launcher(name, config)
        if run is None:
            continue
        cmp.runs[name] = run
        record = _record(run, config, workload, None, None)
        cmp.records.append(record)
        if on_record is not None:
            on_record(record)
    return cmp if cmp.runs else None
