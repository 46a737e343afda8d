"""Predict each strategy's step time and memory, rank them and say why.

Step-time models (cost-model.md §2-§3, §6; all collectives through :func:`collective_s`):

* ``dp`` (torch.nn.DataParallel, one process): broadcast of the weights from GPU 0 every step, scatter of
  the inputs, forward in threads, gather of every replica's outputs onto GPU 0 (a GPT's full logits),
  scatter of their gradient back, backward, reduce of the gradients to GPU 0 (after backward: nothing
  overlaps), optimizer on GPU 0, plus a per-device host cost (measured by ``gpucomm train`` records where
  they exist: ``TrainRecord.host_ms_per_device``); GPU 0 also holds the gathered outputs and their gradient.
* ``replicated`` (ours, one process): persistent replicas; bucketed all-reduce overlapped with backward;
  per-device thread cost.
* ``ddp`` (one process per GPU): DDP's buckets (1 MiB first, then 25 MiB) all-reduced as backward
  produces them; only what runs past the end of backward is exposed (the last bucket always is), plus
  DDP's measured 3-5% overhead (4% used, for every process-per-GPU strategy, at every world size: it
  was measured on one GPU).
* ``zero1``/``zero2``: gradients reduce-scattered in buckets during backward, the optimizer on a 1/N
  shard, then an all-gather of the updated weights that nothing overlaps: 2 Psi per GPU, like DDP.
* ``zero3``/``fsdp``: per unit, an all-gather of its weights before forward and again before backward,
  prefetched one unit ahead (so it hides behind the previous unit's compute), and a reduce-scatter of
  its gradients after backward: 3 Psi per GPU.  They differ in memory: fsdp holds two unsharded units
  (current + prefetched, weights and gradients); zero3 uses DeepSpeed's estimate 4 x largest unit + 18 Psi/N.

Compute per device for ``b = global_batch / N`` samples comes from one of three sources:

* a measurement: calibrated ``single`` steps, interpolated between the measured batches;
* ``6 Psi b tokens / achieved FLOP/s``, with the FLOP/s from calibration;
* ``6 Psi b tokens / (peak x MFU)``, with the MFU stated (default :data:`DEFAULT_MFU`).

On ``cpu-gloo`` the devices of one machine share its cores, whether they are processes or threads (see
:func:`_compute_s`).  Calibration may
add a per-device cost and a compute slowdown per strategy
(:func:`gpucomm.advisor.calibrate.fit_overheads`).  The optimizer is memory-bound: bytes touched / HBM
bandwidth (already inside a measured step).  Scaling efficiency: throughput / (N x one GPU's throughput
at the same per-GPU batch with no communication); it can exceed 1 when sharding the optimizer saves more
than communication costs.

Ranking: strategies that do not fit in memory (or do not apply: dp and replicated need one machine) are
flagged, not ranked.  The rest are ordered by predicted step time, except that a simpler strategy within
:data:`TIE_MARGIN` of the fastest is preferred (order :data:`SIMPLICITY`): differences smaller than the
model's error are not a reason to shard.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

from gpucomm.advisor import cost
from gpucomm.advisor.fits import CollectiveFit, collective_fit
from gpucomm.advisor.hardware import HardwareProfile
from gpucomm.advisor.memory import model_state_terms
from gpucomm.advisor.workload import Workload, builtin_shape, make_workload

__all__ = ["DDP_OVERHEAD_FRAC", "DEFAULT_MFU", "DEFAULT_PER_DEVICE_S", "SIMPLICITY", "STRATEGIES", "dp_output_bytes",
           "TIE_MARGIN", "Prediction", "PredictionError", "collective_s", "predict", "rank", "scale",
           "single_step_s", "workload_from_record"]

STRATEGIES = ("dp", "replicated", "ddp", "zero1", "zero2", "zero3", "fsdp")
SIMPLICITY = ("ddp", "replicated", "zero1", "zero2", "fsdp", "zero3", "dp")
"""Preference among strategies whose predicted times are within :data:`TIE_MARGIN`."""
TIE_MARGIN = 0.05
"""Half the advisor's 10% accuracy target: a smaller predicted gain is no reason to pick a harder setup."""
DEFAULT_MFU = 0.30
"""Default model FLOPs utilisation: GPT-124M on one H200 ran 48.5 ms for 16x1024 tokens (``single``,
benchmarks/results/train-gpt124m_h200x1_2026-12-02), 6 x 124.5 M x 16384 / 48.5 ms = 252 TFLOP/s = 25% of the
989 TFLOP/s bf16 dense peak; 0.30 is kept as a round figure for fused/compiled steps — calibrate."""
DDP_OVERHEAD_FRAC = 0.04
"""DDP's own overhead on one GPU, 3-5% (pytorch benchmarks/distributed/ddp/README.md, cost-model.md §2).
Applied at every world size, one included (that is where it was measured: the hooks and bucket copies
run whether or not there is anyone to all-reduce with), and to ZeRO and FSDP too (assumed: their
wrappers hook backward and copy into buckets the same way)."""
DEFAULT_PER_DEVICE_S = {"dp": 2.0e-3, "replicated": 0.2e-3, "ddp": 0.0, "zero1": 0.0, "zero2": 0.0,
                        "zero3": 0.0, "fsdp": 0.0}
"""Per-device per-step host cost when no train record measures it.  ASSUMED, not measured: dp 2 ms
(replicating the module and running a thread per replica under the GIL), replicated 0.2 ms (a thread per
device, persistent replicas).  ``gpucomm advise --calibrate`` replaces them with the median
``TrainRecord.host_ms_per_device`` of the strategy's records, and every output says which was used."""
_LOCAL = ("dp", "replicated")


class PredictionError(ValueError):
    """The profile lacks a number the prediction needs (e.g. an uncalibrated cpu-gloo link)."""


@dataclass(kw_only=True, slots=True)
class Prediction:
    """One strategy's predicted step on one configuration (seconds, bytes)."""

    strategy: str
    gpus_per_node: int
    nodes: int
    step_time_s: float
    compute_s: float
    optimizer_s: float
    exposed_comm_s: float
    comm_s: float
    overhead_s: float
    """Per-device cost, DDP hook overhead and calibrated slowdown together."""
    memory_bytes: float
    memory_parts: dict[str, float]
    capacity_bytes: int | None
    applicable: bool = True
    note: str = ""
    samples_per_s: float = 0.0
    tokens_per_s: float | None = None
    scaling_efficiency: float = 0.0
    rank: int | None = None
    reason: str = ""
    slowdown_s: float = 0.0
    """The part of ``overhead_s`` from the calibrated compute slowdown."""
    assumptions: list[str] = field(default_factory=list)

    @property
    def gpus(self) -> int:
        return self.gpus_per_node * self.nodes

    @property
    def fits(self) -> bool:
        return self.capacity_bytes is None or self.memory_bytes <= self.capacity_bytes

    @property
    def comm_share(self) -> float:
        return self.exposed_comm_s / self.step_time_s if self.step_time_s > 0 else 0.0

    @property
    def rankable(self) -> bool:
        return self.applicable and self.fits


# ---------------------------------------------------------------- collectives


def _fits(profile: HardwareProfile) -> list[CollectiveFit]:
    rows = (profile.calibration or {}).get("collectives", [])
    return [r if isinstance(r, CollectiveFit) else CollectiveFit(**r) for r in rows]


def collective_s(profile: HardwareProfile, op: str, nbytes: float, g: int, m: int = 1,
                 scope: str = "process") -> float:
    """Seconds for one collective of ``nbytes`` over ``m`` machines of ``g`` devices.

    A calibrated fit for exactly (op, n=g) on one machine wins; otherwise the hierarchical alpha-beta
    formula on the profile's links (calibrated links where calibration derived them).
    """
    if g * m == 1 or nbytes <= 0:
        return 0.0
    if m == 1:
        fit = collective_fit(_fits(profile), op, g, nbytes, scope)
        if fit is not None:
            return max(0.0, fit.time_s(nbytes))
    link = profile.intra
    if not math.isfinite(link.bandwidth_gbps) or not math.isfinite(link.alpha_us):
        raise PredictionError(f"profile {profile.name!r} has no {op} figure for n={g}: calibrate it with "
                              f"bench records at this participant count")
    inter = None if profile.inter is None else (profile.inter.bandwidth_gbps * 1e9, profile.inter.alpha_us * 1e-6)
    return cost.hierarchical_s(op, nbytes, g, m, (link.bandwidth_gbps * 1e9, link.alpha_us * 1e-6), inter)


# ---------------------------------------------------------------- compute


def _compute_s(profile: HardwareProfile, wl: Workload, b: float, mfu: float, g: int = 1) -> tuple[float, str]:
    """Seconds of forward + backward for ``b`` samples on one device of a machine running ``g`` devices.

    On a ``cpu-gloo`` profile the "devices" of one machine share its C cores: with t torch threads per
    device (as measured on one device), g devices slow each other down by ``max(1, g t / C)`` — with
    torch's default t = C, g devices of ``b`` samples take as long as one device doing ``g b``.  This
    holds for processes (ddp) and for the Python threads of one process (replicated) alike: ATen ops
    release the GIL, so two replica threads with one torch thread each run on two cores at once.  On
    2 cores with ``OMP_NUM_THREADS=1``, replicated gpt-tiny and mlp ran as fast as ddp, about 0.6x
    single on the whole batch (benchmarks/results/advisor-accuracy_cpu-gloo_2026-12-02.md).  What the
    GIL does serialise (Python between the ops) is left to the calibrated slowdown.
    """
    if profile.kind == "cpu-gloo" and g > 1:
        host = (profile.calibration or {}).get("host") or {}
        cores = host.get("cores") or 1
        threads = host.get("threads") or cores
        b *= max(1.0, g * threads / cores)
    comp = (profile.calibration or {}).get("compute") or {}
    model = (comp.get("models") or {}).get(wl.model)
    if model:
        return _measured(model, b), "compute measured (train records, single)"
    flops = cost.train_flops(wl.params, b * wl.tokens_per_sample)
    if comp.get("achieved_flops"):
        return flops / comp["achieved_flops"], "compute from the FLOP/s achieved in train records"
    peak = profile.peak_flops(wl.precision.compute_dtype)
    if peak is None:
        raise PredictionError(f"profile {profile.name!r} has no {wl.precision.compute_dtype} peak and no "
                              f"measured compute for {wl.model!r}: calibrate with train records")
    return flops / (peak * mfu), f"compute = 6 x params x tokens / ({peak / 1e12:.0f} TFLOP/s x MFU {mfu:.2f})"


def _measured(model: dict[str, Any], b: float) -> float:
    """A measured step at ``b`` samples: interpolated between measured batches; proportional below the
    smallest; along the last segment (or the fitted line) above the largest."""
    pts = model.get("points") or []
    if len(pts) < 1:
        return model["c0_s"] + model["c1_s_per_sample"] * b
    if b <= pts[0][0]:
        return pts[0][1] * b / pts[0][0]
    for (b0, s0), (b1, s1) in zip(pts[:-1], pts[1:], strict=True):
        if b <= b1:
            return s0 + (s1 - s0) * (b - b0) / (b1 - b0)
    if len(pts) >= 2:
        (b0, s0), (b1, s1) = pts[-2], pts[-1]
        return s1 + max(0.0, (s1 - s0) / (b1 - b0)) * (b - b1)
    return pts[0][1] * b / pts[0][0]


def _from_steps(how: str) -> bool:
    """Whether compute came from measured whole steps (a measured step, or the FLOP/s whole steps achieved):
    then the optimizer is inside it already and is not added again."""
    return how.startswith(("compute measured", "compute from the FLOP/s achieved"))


def _optimizer_s(profile: HardwareProfile, wl: Workload, shard: float, measured: bool) -> float:
    if measured or not profile.memory_bw_gbps:
        return 0.0  # inside a measured step, or no bandwidth to estimate it from
    return cost.OPTIMIZER_BYTES_TOUCHED[wl.optimizer] * wl.params * shard / (profile.memory_bw_gbps * 1e9)


# ---------------------------------------------------------------- memory


def dp_output_bytes(wl: Workload) -> float:
    """Bytes of one step's model outputs, which DataParallel gathers onto device 0: ``batch x seq x vocab``
    logits for a GPT (in the compute dtype: 2 bytes under bf16, 4 in fp32), ``batch x classes`` for an MLP,
    and 4 bytes per sample when the shape is unknown."""
    s = wl.shape
    per = 4 if wl.precision.compute_dtype == "fp32" else 2
    if s is None:
        return 4.0 * wl.global_batch
    if s.family == "gpt":
        return float(wl.global_batch * wl.tokens_per_sample * s.vocab * per)
    return float(wl.global_batch * s.classes * 4)


def _memory(strategy: str, wl: Workload, n: int, b: float) -> dict[str, float]:
    p = wl.precision
    stage = {"zero1": 1, "zero2": 2, "zero3": 3, "fsdp": 3}.get(strategy, 0)
    parts = {"model_state": sum(model_state_terms(stage, wl.params, n, weight_bytes=p.weight_bytes,
                                                  grad_bytes=p.grad_bytes,
                                                  optimizer_bytes=p.optimizer_bytes[wl.optimizer])),
             "activations": wl.activation_bytes(b)}
    grad_total = wl.params * p.grad_bytes
    if strategy in ("ddp", "replicated"):
        parts["buckets"] = grad_total  # a gradient-sized bucket copy (gradient_as_bucket_view=False)
    elif strategy in ("zero1", "zero2"):
        parts["buckets"] = min(grad_total, cost.DDP_BUCKET_CAP_BYTES)
    elif strategy == "fsdp":
        parts["unsharded_units"] = 2 * max(wl.units()) * (p.weight_bytes + p.grad_bytes)
    elif strategy == "zero3":  # DeepSpeed estimate_zero3_model_states_mem_needs: 4 x largest + 18 Psi / N
        parts["model_state"] = 18 * wl.params / n
        parts["unsharded_units"] = 4 * max(wl.units())
    elif strategy == "dp" and n > 1:
        # device 0 holds every replica's gathered outputs and their gradient: its memory is the step's peak
        parts["gathered_outputs"] = 2 * dp_output_bytes(wl)
    return parts


# ---------------------------------------------------------------- strategies


def _prefetch_exposed_s(comm: list[float], compute: list[float]) -> float:
    """Compute waiting on per-unit gathers issued back to back ahead of it (FSDP prefetch)."""
    comm_end = comp_end = 0.0
    for c, w in zip(comm, compute, strict=True):
        comm_end += c
        comp_end = max(comp_end, comm_end) + w
    return max(0.0, comp_end - sum(compute))


def _times(profile: HardwareProfile, op: str, sizes: list[float], g: int, m: int, scope: str) -> list[float]:
    return [collective_s(profile, op, s, g, m, scope) for s in sizes]


def _comm(strategy: str, profile: HardwareProfile, wl: Workload, g: int, m: int,
          fwd: float, bwd: float) -> tuple[float, float]:
    """(exposed, total) communication seconds of one step."""
    p, n = wl.precision, g * m
    grad_bytes = wl.params * p.grad_bytes
    if n == 1:
        return 0.0, 0.0
    if strategy == "dp":
        # DataParallel's step, in order, nothing overlapping: replicate (broadcast the weights from device 0),
        # scatter the inputs, gather every replica's outputs onto device 0 (for a GPT: the full logits),
        # scatter the outputs' gradient back, and after the whole backward reduce the gradients onto device 0.
        inputs = wl.global_batch * wl.tokens_per_sample * 8  # int64 token ids (or one float row) per sample
        outputs = dp_output_bytes(wl)
        t = [collective_s(profile, "broadcast", wl.params * p.weight_bytes, g, 1, "local"),
             collective_s(profile, "scatter", inputs, g, 1, "local"),
             collective_s(profile, "gather", outputs, g, 1, "local"),
             collective_s(profile, "scatter", outputs, g, 1, "local"),
             collective_s(profile, "reduce", grad_bytes, g, 1, "local")]
        return sum(t), sum(t)
    if strategy in ("ddp", "replicated"):
        sizes = cost.bucket_sizes(grad_bytes)
        times = _times(profile, "all_reduce", sizes, g, m, "local" if strategy == "replicated" else "process")
        return cost.overlapped_exposed_s(sizes, times, bwd), sum(times)
    if strategy in ("zero1", "zero2"):
        sizes = cost.bucket_sizes(grad_bytes)
        times = _times(profile, "reduce_scatter", sizes, g, m, "process")
        ag = collective_s(profile, "all_gather", wl.params * p.weight_bytes, g, m, "process")
        return cost.overlapped_exposed_s(sizes, times, bwd) + ag, sum(times) + ag
    units = wl.units()
    total = float(sum(units))
    ag = _times(profile, "all_gather", [u * p.weight_bytes for u in units], g, m, "process")
    rs = _times(profile, "reduce_scatter", [u * p.grad_bytes for u in units], g, m, "process")
    fwd_units = [fwd * u / total for u in units]
    bwd_units = [bwd * u / total for u in reversed(units)]
    bwd_comm = [a + r for a, r in zip(reversed(ag), reversed(rs), strict=True)]
    exposed = _prefetch_exposed_s(ag, fwd_units) + _prefetch_exposed_s(bwd_comm, bwd_units) + rs[0]
    return exposed, 2 * sum(ag) + sum(rs)


def single_step_s(profile: HardwareProfile, wl: Workload, mfu: float = DEFAULT_MFU) -> float:
    """Predicted step of plain training on one device (``gpucomm train``'s ``single``): compute + optimizer.

    No wrapper, no communication, no calibrated overhead: the baseline every strategy is compared with.
    """
    compute, how = _compute_s(profile, wl, wl.global_batch, mfu)
    return compute + _optimizer_s(profile, wl, 1.0, _from_steps(how))


def _not_applicable(strategy: str, profile: HardwareProfile, m: int) -> str:
    if strategy in _LOCAL and m > 1:
        return f"{strategy} is one process: it cannot span {m} machines"
    if strategy == "dp" and profile.kind == "cpu-gloo":
        return "DataParallel needs CUDA devices"
    return ""


def predict(strategy: str, profile: HardwareProfile, wl: Workload, *, gpus_per_node: int, nodes: int = 1,
            mfu: float = DEFAULT_MFU, per_device_s: float | None = None,
            slowdown: float | None = None) -> Prediction:
    """Predict one strategy's step on ``nodes`` x ``gpus_per_node`` devices of ``profile``.

    Raises:
        ValueError: unknown strategy or a bad device count.
        PredictionError: the profile lacks a figure the prediction needs.
    """
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy: expected one of {', '.join(STRATEGIES)}, but got {strategy!r}")
    if gpus_per_node < 1 or nodes < 1:
        raise ValueError(f"gpus_per_node, nodes: expected >= 1, but got {gpus_per_node}, {nodes}")
    g, m = gpus_per_node, nodes
    n = g * m
    b = wl.global_batch / n
    compute, how = _compute_s(profile, wl, b, mfu, g)
    measured = _from_steps(how)
    fwd, bwd = compute / 3, 2 * compute / 3
    shard = 1.0 / n if strategy.startswith("zero") or strategy == "fsdp" else 1.0
    opt = _optimizer_s(profile, wl, shard, measured)
    exposed, total = _comm(strategy, profile, wl, g, m, fwd, bwd)
    per_device_s, slowdown, source = _overheads(profile, strategy, per_device_s, slowdown)
    overhead = per_device_s * n if n > 1 else 0.0
    slowdown_s = slowdown * compute if n > 1 else 0.0
    if strategy not in _LOCAL:  # backward hooks and bucket copies of every process-per-GPU wrapper, even at
        overhead += DDP_OVERHEAD_FRAC * compute  # world size 1 (PyTorch measured DDP's 3-5% on ONE GPU)
    overhead += slowdown_s
    step = compute + opt + exposed + overhead
    parts = _memory(strategy, wl, n, b)
    single = _compute_s(profile, wl, b, mfu)[0] + _optimizer_s(profile, wl, 1.0, measured)
    pred = Prediction(strategy=strategy, gpus_per_node=g, nodes=m, step_time_s=step, compute_s=compute,
                      optimizer_s=opt, exposed_comm_s=exposed, comm_s=total, overhead_s=overhead,
                      memory_bytes=sum(parts.values()), memory_parts=parts, capacity_bytes=profile.memory_bytes,
                      samples_per_s=wl.global_batch / step, scaling_efficiency=single / step,
                      assumptions=[how])
    pred.tokens_per_s = pred.samples_per_s * wl.seq_len if wl.seq_len else None
    pred.note = _not_applicable(strategy, profile, m)
    pred.applicable = not pred.note
    if wl.shape is None:
        pred.assumptions.append("no model shape: activations not counted, the model is one sharding unit")
    pred.slowdown_s = slowdown_s
    if source and pred.applicable and n > 1:
        pred.assumptions.append(source)
    return pred


def _overheads(profile: HardwareProfile, strategy: str, per_device_s: float | None,
               slowdown: float | None) -> tuple[float, float, str]:
    """(per-device s, compute slowdown, assumption or "") for ``strategy``.

    Calibrated values where the strategy was measured; a process-per-GPU strategy that was not (ZeRO,
    FSDP) takes DDP's calibration, the same machinery; else the stated defaults.
    """
    calib = profile.calibration or {}
    fitted, slow = calib.get("per_device_s", {}), calib.get("slowdown", {})
    source = strategy
    if strategy not in fitted and strategy not in _LOCAL and "ddp" in fitted:
        source = "ddp"
    note = ""
    measured = calib.get("host_per_device", {})
    if per_device_s is None:
        if strategy in measured:
            per_device_s = measured[strategy]["s"]
            note = (f"{strategy} host cost {per_device_s * 1e3:.2f} ms per device per step, measured "
                    f"(median host_ms_per_device of {measured[strategy]['rows']} train records)")
        elif source in fitted:
            per_device_s = fitted[source]
            if source != strategy:
                note = f"{strategy} per-device cost and slowdown taken from ddp's calibration"
        else:
            per_device_s = DEFAULT_PER_DEVICE_S[strategy]
            if per_device_s:
                note = (f"{strategy} host cost {per_device_s * 1e3:.1f} ms per device per step ASSUMED: no train "
                        f"record with host_ms_per_device calibrates it (gpucomm advise --calibrate DIR)")
    if slowdown is None:
        slowdown = slow.get(source, 0.0)
    return per_device_s, slowdown, note


# ---------------------------------------------------------------- ranking and reasons

_GiB = 2**30
_WHY_COMM = {
    "dp": "the weight broadcast and the gradient reduce to GPU 0 run every step and overlap nothing",
    "replicated": "the last bucket(s) cannot overlap with backward",
    "ddp": "the last bucket(s) cannot overlap with backward",
    "zero1": "the weight all-gather after the optimizer overlaps nothing",
    "zero2": "the weight all-gather after the optimizer overlaps nothing",
    "zero3": "3 Psi of traffic (50% more than DDP) in per-unit gathers",
    "fsdp": "3 Psi of traffic (50% more than DDP) in per-unit gathers",
}


def _ms(s: float) -> str:
    return f"{s * 1e3:.3g} ms"


def _winner_reason(best: Prediction, fastest: Prediction) -> str:
    mem = "" if best.capacity_bytes is None else \
        f"; fits: {best.memory_bytes / _GiB:.1f} of {best.capacity_bytes / _GiB:.0f} GiB per GPU"
    lead = f"fastest predicted step ({_ms(best.step_time_s)})" if best is fastest else \
        (f"within {TIE_MARGIN:.0%} of {fastest.strategy} ({_ms(best.step_time_s)} vs "
         f"{_ms(fastest.step_time_s)}) and first in the preference order {' > '.join(SIMPLICITY)}")
    return f"{lead}, {best.comm_share:.0%} of it exposed communication{mem}"


def _loser_reason(p: Prediction, best: Prediction) -> str:
    if not p.applicable:
        return f"not applicable: {p.note}"
    if not p.fits:
        parts = ", ".join(f"{k.replace('_', ' ')} {v / _GiB:.1f}" for k, v in p.memory_parts.items() if v)
        return (f"does not fit: needs {p.memory_bytes / _GiB:.1f} GiB per GPU ({parts}), "
                f"{p.capacity_bytes / _GiB:.0f} GiB available")
    slower = p.step_time_s / best.step_time_s - 1
    if slower < TIE_MARGIN:
        sharded = p.strategy.startswith("zero") or p.strategy == "fsdp"
        best_sharded = best.strategy.startswith("zero") or best.strategy == "fsdp"
        if sharded and best_sharded:
            why = f"{best.strategy} already fits, so more sharding buys nothing"
        elif sharded:
            why = "the replicated state fits, so sharding buys nothing"
        else:
            why = f"{best.strategy} comes first in the preference order {' > '.join(SIMPLICITY)}"
        return f"within {TIE_MARGIN:.0%} of {best.strategy} ({_ms(p.step_time_s)}); {why}"
    diffs = {"exposed communication": (p.exposed_comm_s - best.exposed_comm_s, _WHY_COMM[p.strategy]),
             "per-device overhead": (p.overhead_s - p.slowdown_s - best.overhead_s + best.slowdown_s,
                                     "Python/thread cost per device per step"),
             "compute slowdown": (p.slowdown_s - best.slowdown_s, "calibrated: contention with communication "
                                                                  "or other processes"),
             "optimizer": (p.optimizer_s - best.optimizer_s, "the optimizer runs on unsharded state"),
             "compute": (p.compute_s - best.compute_s, "")}
    what, (delta, why) = max(diffs.items(), key=lambda kv: kv[1][0])
    return f"{slower:.0%} slower than {best.strategy}: +{_ms(delta)} {what}" + (f" ({why})" if why else "")


def rank(preds: list[Prediction]) -> list[Prediction]:
    """Order predictions, set ``rank`` (1 = recommended, None = flagged) and ``reason``; returns the list."""
    ok = sorted((p for p in preds if p.rankable), key=lambda p: p.step_time_s)
    flagged = [p for p in preds if not p.rankable]
    if ok:
        fastest = ok[0]
        close = [p for p in ok if p.step_time_s <= fastest.step_time_s * (1 + TIE_MARGIN)]
        close.sort(key=lambda p: SIMPLICITY.index(p.strategy))
        best = close[0]
        ok = close + [p for p in ok if p not in close]
        best.reason = _winner_reason(best, fastest)
        for p in ok[1:]:
            p.reason = _loser_reason(p, best)
        for p in flagged:
            p.reason = _loser_reason(p, best)
    else:
        for p in flagged:
            p.reason = _loser_reason(p, p)
    for i, p in enumerate(ok, 1):
        p.rank = i
    for p in flagged:
        p.rank = None
    return ok + flagged


def advise(profile: HardwareProfile, wl: Workload, *, gpus_per_node: int, nodes: int = 1,
           mfu: float = DEFAULT_MFU, strategies: tuple[str, ...] = STRATEGIES) -> list[Prediction]:
    """Every strategy predicted and ranked."""
    return rank([predict(s, profile, wl, gpus_per_node=gpus_per_node, nodes=nodes, mfu=mfu) for s in strategies])


def scale(profile: HardwareProfile, wl: Workload, *, per_gpu_batch: float, max_gpus: int = 4096,
          mfu: float = DEFAULT_MFU, strategies: tuple[str, ...] = STRATEGIES) -> list[Prediction]:
    """Weak scaling: every strategy at 1, 2, 4 … ``max_gpus`` GPUs, per-GPU batch fixed.

    Up to ``profile.max_gpus_per_node`` GPUs share one machine; beyond, machines of that many GPUs
    (a profile with no network stops at one machine).
    """
    out = []
    gpus = 1
    if profile.inter is None:
        max_gpus = min(max_gpus, profile.max_gpus_per_node)
    while gpus <= max_gpus:
        g = min(gpus, profile.max_gpus_per_node)
        m = math.ceil(gpus / g)
        w = dataclasses.replace(wl, global_batch=max(1, round(per_gpu_batch * g * m)))
        for s in strategies:
            out.append(predict(s, profile, w, gpus_per_node=g, nodes=m, mfu=mfu))
        gpus *= 2
    return out


def workload_from_record(r: Any) -> Workload:
    """The workload a :class:`~gpucomm.records.TrainRecord` ran (AdamW, as ``gpucomm train`` uses)."""
    dtype = r.precision if r.precision in cost.PRECISIONS else "fp32"
    model = r.model if builtin_shape(r.model) else None
    wl = make_workload(model, params=r.params, dtype=dtype, optimizer="adam", global_batch=r.global_batch,
                       seq_len=r.seq_len)
    return dataclasses.replace(wl, model=r.model)
