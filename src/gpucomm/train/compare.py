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
How steps, GPU time and host time are measured: :mod:`gpucomm.train.loop`.

A strategy that does not fit (CUDA out of memory, or the host's ``MemoryError``) becomes a "failed" row
whose note names the strategy, model, per-device batch and the memory the device had; its memory is
released and the next strategy runs.
"""

from __future__ import annotations

import gc
import math
import statistics
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch

from gpucomm.records import TrainRecord
from gpucomm.train.config import TOLERANCES, ConfigError, TrainConfig
from gpucomm.train.loop import RunResult, StrategyInterrupted, median_phases, run_strategy
from gpucomm.train.models import Workload, load_workload
from gpucomm.train.requirements import StrategyRequirements, resolve

__all__ = ["Comparison", "Equality", "compare_runs", "run_comparison", "run_launched", "under_launcher"]

StepCallback = Callable[[str, int, int], None]
"""``(strategy name, steps done, total steps)``: progress of the strategy running in this process."""


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


def _oom_message(req: StrategyRequirements, config: TrainConfig, exc: BaseException) -> str:
    per_device = config.global_batch // max(1, len(req.devices))
    where = f"strategy {req.name!r}, model {config.model!r}, per-device batch {per_device}"
    if config.device_type == "cuda":
        device = req.devices[0]
        try:
            free, total = torch.cuda.mem_get_info(device)
            had = f"{device} has {total / 2**30:.1f} GiB ({free / 2**30:.1f} GiB free now)"
            if not req.process_group:  # the run was in this process: its allocator saw the peak
                had += f"; the run reached {torch.cuda.max_memory_allocated(device) / 2**30:.1f} GiB allocated"
        except (RuntimeError, AssertionError):
            had = f"{device}'s memory could not be read"
        return f"out of GPU memory: {where}; {had}; lower --global-batch or --seq-len, or use more devices"
    return (f"out of host memory ({type(exc).__name__}): {where}; lower --global-batch or --seq-len, "
            f"or free host memory")


def _is_oom(exc: BaseException) -> bool:
    if isinstance(exc, MemoryError):
        return True
    oom = getattr(torch.cuda, "OutOfMemoryError", None)
    if oom is not None and isinstance(exc, oom):
        return True
    return "CUDA out of memory" in str(exc) or "OutOfMemoryError" in str(exc)


def _release_memory() -> None:
    """After a failed run: drop its tensors and give the cached blocks back before the next strategy."""
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def _run(req: StrategyRequirements, workload: Workload, config: TrainConfig,
         on_step: Callable[[int, int], None] | None) -> RunResult:
    if req.process_group:
        from gpucomm.train.launching import launch_strategy

        return launch_strategy(req.name, config, req.world_size)
    return run_strategy(req.cls(config, req.devices), workload, config, on_step=on_step)


def _stats(run: RunResult, config: TrainConfig) -> dict:
    timed = run.step_ms[config.warmup_steps:]
    if not timed:  # an interrupted run that finished no timed step
        return {"samples_per_s": None, "step_ms_median": None, "step_ms_p90": None, "comm_ms_median": None,
                "host_ms_median": None, "host_ms_per_device": None, "gpu_ms_median": None,
                "host_breakdown_ms": median_phases(run.host_phases_ms)}
    sps = statistics.median(config.global_batch * 1e3 / t for t in timed)
    comm = run.comm_ms[config.warmup_steps:] if run.comm_ms else None
    host = statistics.median(run.host_ms) if run.host_ms else None
    return {"samples_per_s": sps, "step_ms_median": statistics.median(timed),
            "step_ms_p90": float(np.percentile(timed, 90)),
            "comm_ms_median": statistics.median(comm) if comm else None,
            "host_ms_median": host,
            "host_ms_per_device": host / max(1, run.devices_driven) if host is not None else None,
            "gpu_ms_median": statistics.median(run.gpu_ms) if run.gpu_ms else None,
            "host_breakdown_ms": median_phases(run.host_phases_ms)}


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def _notes(run: RunResult, config: TrainConfig, req: StrategyRequirements, problems: list[str]) -> list[str]:
    notes = []
    if len(set(run.devices)) < len(run.devices) and run.devices[0].startswith("cuda"):
        notes.append(f"devices repeat ({', '.join(run.devices)}): exercises the code paths; "
                     f"the speed is not meaningful")
    if config.device_type == "cpu":
        notes.append("CPU numbers (step time = host clock; no CUDA events)")
    elif run.host_ms and run.host_source == "timed steps":
        notes.append("host time from timed steps: may include waits for a full launch queue")
    notes.extend(req.notes)
    notes.extend(problems)
    return notes


def _record(run: RunResult, config: TrainConfig, workload: Workload, req: StrategyRequirements,
            single: TrainRecord | None, equality: Equality | None, *,
            interrupted: StrategyInterrupted | None = None) -> TrainRecord:
    stats = _stats(run, config)
    n = len(run.devices)
    # JSON has no NaN/inf: a diverged loss ends the recorded history and fails the row.
    bad = next((i for i, v in enumerate(run.losses) if not math.isfinite(v)), None)
    problems = [*run.problems, *([f"loss is not finite from step {bad} on"] if bad is not None else [])]
    eff = 1.0 if run.strategy == "single" and interrupted is None else None
    if single is not None and single.samples_per_s and stats["samples_per_s"] is not None:
        eff = stats["samples_per_s"] / (n * single.samples_per_s)
    status = "failed" if problems else "ok"
    if interrupted is not None:
        timed = max(0, interrupted.done - config.warmup_steps)
        problems = [f"interrupted after {interrupted.done} of {interrupted.total} steps: a partial row "
                    f"({timed} timed step{'s' * (timed != 1)}; no final parameters, not compared)", *problems]
        status = "interrupted"
    return TrainRecord(
        strategy=run.strategy, model=workload.name, n_devices=n, world_size=run.world_size,
        device_type=config.device_type, precision=run.precision, global_batch=config.global_batch,
        seq_len=workload.seq_len, steps=len(run.losses) if interrupted is not None else config.steps,
        warmup_steps=config.warmup_steps, status=status, params=run.params,
        tokens_per_s=stats["samples_per_s"] * workload.seq_len
        if workload.seq_len and stats["samples_per_s"] is not None else None,
        step_ms=run.step_ms, peak_mem_bytes=run.peak_mem_bytes, scaling_efficiency=eff,
        losses=run.losses if bad is None else run.losses[:bad],
        equal_to_single=None if equality is None else equality.equal,
        max_loss_rel_diff=None if equality is None else _finite(equality.max_loss_rel_diff),
        max_param_rel_diff=None if equality is None else _finite(equality.max_param_rel_diff),
        tolerance=None if equality is None else equality.tolerance,
        note="; ".join(_notes(run, config, req, problems)), devices=list(run.devices),
        graphs=run.graphs, **stats,
    )


def _placeholder(req: StrategyRequirements, config: TrainConfig, workload: Workload, status: str,
                 note: str) -> TrainRecord:
    return TrainRecord(strategy=req.name, model=workload.name, n_devices=len(req.devices),
                       world_size=req.world_size, device_type=config.device_type,
                       precision=config.resolved_precision(workload.autocast), global_batch=config.global_batch,
                       seq_len=workload.seq_len, steps=config.steps, warmup_steps=config.warmup_steps,
                       status=status, note=note, devices=[str(d) for d in req.devices])


def _tolerance(config: TrainConfig, precision: str) -> float:
    return config.tolerance if config.tolerance is not None else TOLERANCES[precision]


def run_comparison(config: TrainConfig, *, on_record: Callable[[TrainRecord], None] | None = None,
                   on_start: Callable[[str], None] | None = None, on_step: StepCallback | None = None,
                   resolved: list[StrategyRequirements] | None = None,
                   workload: Workload | None = None) -> Comparison:
    """Run ``config.strategies`` (single first) and compare each with single.

    Args:
        config: the comparison.
        on_record: called with each finished row as soon as it exists (e.g. a RecordWriter's ``write``).
        on_start: called with each strategy's name before it runs (progress display).
        on_step: called after each step of a strategy run in this process (progress display).
        resolved: the strategies resolved by :func:`gpucomm.train.requirements.resolve` (the CLI resolves them
            once, before anything is created); None resolves them here.
        workload: the loaded workload (None: loaded here from ``config.model``).

    Returns:
        a :class:`Comparison`; strategies that cannot run here have status "not-applicable", those that
        raised (or ran out of memory) have status "failed" with the reason in ``note`` (the others
        still run).  A ``KeyboardInterrupt`` propagates; the rows already passed to ``on_record`` stay,
        and a strategy running in this process when it came adds a row of its finished steps (status
        "interrupted") first.

    Raises:
        ConfigError: an unknown strategy, or a global batch that does not divide by a strategy's devices.
        gpucomm.train.models.ModelError: the model cannot be loaded.
    """
    resolved = resolve(config) if resolved is None else resolved
    if workload is None:
        workload = load_workload(config.model, seed=config.seed, seq_len=config.seq_len)
    cmp = Comparison(config=config)
    single: TrainRecord | None = None
    for req in resolved:
        if on_start is not None:
            on_start(req.name)
        steps = (lambda done, total, name=req.name: on_step(name, done, total)) if on_step else None
        try:
            record = _one(req, config, workload, cmp, single, steps)
        except StrategyInterrupted as exc:  # keep the finished steps as a partial row, then stop
            if exc.partial is not None:
                record = _record(exc.partial, config, workload, req, single, None, interrupted=exc)
                cmp.records.append(record)
                if on_record is not None:
                    on_record(record)
            raise
        if req.name == "single" and record.status == "ok":
            single = record
        cmp.records.append(record)
        if on_record is not None:
            on_record(record)
    return cmp


def _one(req: StrategyRequirements, config: TrainConfig, workload: Workload, cmp: Comparison,
         single: TrainRecord | None, on_step: Callable[[int, int], None] | None) -> TrainRecord:
    if req.not_applicable is not None:
        return _placeholder(req, config, workload, "not-applicable", req.not_applicable)
    failure = None
    try:
        run = _run(req, workload, config, on_step)
    except Exception as exc:
        failure = _oom_message(req, config, exc) if _is_oom(exc) else \
            "".join(traceback.format_exception_only(type(exc), exc)).strip()
    if failure is not None:  # outside the except block: the traceback, and the model it holds, are gone
        _release_memory()
        return _placeholder(req, config, workload, "failed", failure)
    cmp.runs[req.name] = run
    equality = None
    if req.name != "single" and "single" in cmp.runs:
        equality = compare_runs(run, cmp.runs["single"], _tolerance(config, run.precision))
        cmp.equality[req.name] = equality
    return _record(run, config, workload, req, single, equality)


def under_launcher() -> bool:
    """True when torchrun or SLURM started this process as one rank of a multi-process job."""
    import gpucomm.dist as gd

    env = gd.read_env()
    return env.source != "none" and env.world_size > 1


def run_launched(config: TrainConfig, *, on_record: Callable[[TrainRecord], None] | None = None,
                 resolved: list[StrategyRequirements] | None = None) -> Comparison | None:
    """Under torchrun/SLURM: run the strategies of ``config`` that need a process group, across the job.

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
    resolved = resolve(config) if resolved is None else resolved
    workload = load_workload(config.model, seed=config.seed, seq_len=config.seq_len)
    cmp = Comparison(config=config)
    for req in (p for p in resolved if p.process_group and p.not_applicable is None):
        run = run_under_launcher(req.name, config)
        if run is None:
            continue
        cmp.runs[req.name] = run
        record = _record(run, config, workload, req, None, None)
        cmp.records.append(record)
        if on_record is not None:
            on_record(record)
    return cmp if cmp.runs else None
