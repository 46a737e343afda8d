"""Time per optimizer step of one layout: compute, tensor/context/pipeline/data-parallel communication.

Physics with few constants, each stated here (they are not fitted to the published runs the advisor is
checked against; ``gpucomm advise --calibrate`` replaces the datasheet's compute efficiency with the user's own).

**Compute** of one micro-batch on one GPU comes from a compute source
(:func:`gpucomm.advisor.compute.source_for`): a compute profile measured by ``gpucomm measure`` where one exists
for the GPU (or is derived from one of the same die), else the datasheet model
(:mod:`gpucomm.advisor.compute.datasheet`: peak x efficiency x size factor, flash attention, memory-bound bytes,
the ``unfused`` kernels of Megatron-LM 2019).  It answers by part (:class:`~gpucomm.advisor.compute.ComputeParts`:
layers, embedding, head and loss, one layer's forward GEMMs and attention), from which the step is assembled
below, and prices the optimizer step.

**Tensor parallel**: per layer and micro-batch two all-reduce equivalents of ``tokens x h`` 16-bit activations
forward and two backward (with sequence parallel the same bytes as all-gather + reduce-scatter), two more
forward under full recomputation, one more under ``op`` (torchtitan's policy keeps the reduce-scatter outputs
but recomputes the two sequence-parallel all-gathers: half an all-reduce each), on the intra-node link.
``tp_overlap=0`` (the default of Megatron-Core and torchtitan) exposes them all: they sit between dependent
matmuls.  ``tp_overlap=1`` (Megatron-Core's ``--tp-comm-overlap``, PyTorch's async TP) pipelines each against
the GEMM it is split with and exposes only what the GEMMs do not hide (:func:`tp_exposed_s`).

**Context parallel** (ring attention): each layer all-gathers K and V over the cp ranks forward and
reduce-scatters their gradients backward, overlapped with attention compute; only the excess is exposed.

**Pipeline**: 1F1B with ``m = global_batch / (dp x mb)`` micro-batches over stages of their real sizes
(``stages=``; the last one also runs the head and the loss): the step is ``m`` slots of the slowest stage plus
the fill and drain, the other stages' times once, divided by ``vpp`` for the interleaved schedule (Narayanan
et al. SC21, Sec. 2.2: ``(pp - 1) / vpp`` slots for equal stages).  Each slot sends the stage's output forward
and its gradient backward (``tokens x h / tp`` 16-bit values each, scatter/gather over the tp ranks' NICs),
exposed, across machines when the stage boundary crosses one.

**Data parallel** over ``n = dp x cp`` GPUs (gradients are averaged over context-parallel ranks too),
hierarchical across machines (:func:`gpucomm.advisor.cost.hierarchical_s`, the GPUs of a machine sharing its
NICs with the other groups on it):

* ``none``: gradient all-reduce in 25 MiB buckets, overlapped with the last micro-batch's backward;
* ``zero1``/``zero2``: reduce-scatter overlapped the same way, then an all-gather of the updated 16-bit
  weights that nothing overlaps (``ag_overlap=1``: overlapped with the next step's forward, Megatron-Core's
  ``--overlap-param-gather``);
* ``zero3``/``fsdp``: an all-gather of each layer before its forward and (``reshard=fwd``) again before its
  backward, and a reduce-scatter of its gradients, prefetched one layer ahead: exposed is the first layer's
  gather, the last reduce-scatter, and whatever communication exceeds the compute it hides behind — every
  micro-batch for ``reshard=fwd|bwd``, once per step for ``reshard=step`` (:func:`gathered_exposed_s`);
* ``hsdp``: fsdp inside a machine; the 1/shard gradient all-reduce across machines overlaps backward.

**The wrapper** (``wrapper``): ``dataparallel`` replaces the data-parallel collectives with DataParallel's
serial transfers (:func:`dataparallel_parts`) and runs every replica's loss on device 0; ``replicated`` and
``dataparallel`` use one-process ("local") collective figures; each wrapper adds its host cost per device and
compute slowdown (:mod:`gpucomm.advisor.wrappers`).  Replicas that share a device (``Job.colocated``: several
on one GPU, or CPU "devices" sharing the host's cores) run one after another: their compute multiplies.

**Host**: in an eager loop the host issues every kernel and runs ahead of the device (nothing synchronises
inside a step), so a step takes the longer of the device's work and the host's: on one stage, when the host's
time for the layers (``ComputeParts.host_layer_s`` per layer, measured: a per-op checkpointing policy runs
Python for every op) exceeds the device's whole step, the device waits the difference (``host_wait_s``);
pipeline stages, which synchronise every micro-batch, take the longer of the two per slot.

**Optimizer**: the compute source's optimizer step over the local parameters (measured, or Adam's bytes at the
HBM bandwidth), unless measured whole steps give a per-step cost (``ComputeParts.fixed_s``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gpucomm.advisor import cost, wrappers
from gpucomm.advisor.compute.datasheet import (
    ATTENTION_EFFICIENCY,
    EW_PASSES,
    GEMM_DIM0,
    GEMM_EFFICIENCY,
    GEMM_TOKENS0,
    LOSS_BYTES_PER_LOGIT,
    LOSS_BYTES_PER_LOGIT_UNFUSED,
    UnfusedBytes,
    size_factor,
    unfused_layer_bytes,
)
from gpucomm.advisor.compute.parts import ComputeParts
from gpucomm.advisor.compute.source import source_for
from gpucomm.advisor.fits import collective_time_s
from gpucomm.advisor.hardware import HardwareProfile
from gpucomm.advisor.job import KERNELS, Job
from gpucomm.advisor.layout import Layout
from gpucomm.advisor.memory import shard_size
from gpucomm.advisor.memory import stage_params as memory_stage_params
from gpucomm.models import Architecture

__all__ = ["ATTENTION_EFFICIENCY", "EW_PASSES", "GEMM_DIM0", "GEMM_EFFICIENCY", "GEMM_TOKENS0", "KERNELS",
           "LOSS_BYTES_PER_LOGIT", "LOSS_BYTES_PER_LOGIT_UNFUSED", "ComputeParts", "StepTime", "UnfusedBytes",
           "size_factor", "step_time", "unfused_layer_bytes"]
# The datasheet constants and ComputeParts live in gpucomm.advisor.compute (their one home); the names above
# stay importable from here for the modules and tests that read them through timing.

_ACT_BYTES = 2  # 16-bit activations on the wire (TP, CP, PP)


@dataclass(frozen=True, kw_only=True, slots=True)
class StepTime:
    """One step on the slowest pipeline stage, seconds."""

    step_s: float
    compute_s: float
    """Matrix + memory-bound compute of every micro-batch, recomputation and optimizer included."""
    tp_s: float
    cp_exposed_s: float
    bubble_s: float
    p2p_s: float
    dp_exposed_s: float
    dp_total_s: float
    optimizer_s: float
    micro_batches: int
    efficiency: float
    """The GEMM efficiency used (fraction of peak; 0 when compute came from measured steps)."""
    overhead_s: float = 0.0
    """The wrapper's host cost and compute slowdown (:mod:`gpucomm.advisor.wrappers`)."""
    extrapolated: tuple[str, ...] = ()
    """What the compute source looked up outside its measured grid (one line each); empty otherwise."""
    host_wait_s: float = 0.0
    """Device time spent waiting for the host to issue work (module docstring, **Host**)."""

    @property
    def exposed_comm_s(self) -> float:
        return self.tp_s + self.cp_exposed_s + self.p2p_s + self.dp_exposed_s

    @property
    def comm_s(self) -> float:
        return self.tp_s + self.cp_exposed_s + self.p2p_s + self.dp_total_s


def _links(profile: HardwareProfile) -> tuple[tuple[float, float], tuple[float, float] | None]:
    intra = (profile.intra.bandwidth_gbps * 1e9, profile.intra.alpha_us * 1e-6)
    inter = None if profile.inter is None else (profile.inter.bandwidth_gbps * 1e9, profile.inter.alpha_us * 1e-6)
    return intra, inter


class CollectiveUnknown(ValueError):
    """A calibrated profile without a figure for a collective it is asked to price (one line, with the fix)."""


def _group_s(profile: HardwareProfile, op: str, nbytes: float, n: int, per_node: int, gpus_per_node: int,
             scope: str = "process") -> float:
    """A collective over ``n`` GPUs placed ``per_node`` to a machine; the machine's NICs are shared by the
    ``gpus_per_node / per_node`` groups that run at the same time.  On one machine a calibrated profile's
    measured figure for (op, n) wins (:func:`gpucomm.advisor.fits.collective_time_s`; ``scope`` "local" for
    one-process wrappers, "process" otherwise)."""
    if n <= 1 or nbytes <= 0:
        return 0.0
    g = max(1, min(n, per_node))
    m = math.ceil(n / g)
    if m == 1:
        measured = collective_time_s(profile.calibration, op, n, nbytes, scope)
        if measured is not None:
            return measured
    intra, inter = _links(profile)
    if not (math.isfinite(intra[0]) and math.isfinite(intra[1])):
        if (profile.calibration or {}).get("comm_in_wrapper"):
            return 0.0  # calibrated from train records alone: the wrappers' fitted cost holds the communication
        raise CollectiveUnknown(f"profile {profile.name!r} has no {op} figure for {n} participants: calibrate it "
                                f"with gpucomm bench records at n={n} (gpucomm bench --nproc {n})")
    if m > 1 and inter is not None:
        inter = (inter[0] * g / gpus_per_node, inter[1])
    return cost.hierarchical_s(op, nbytes, g, m, intra, inter)


def _buckets_s(profile: HardwareProfile, op: str, grads: float, n: int, per_node: int, gpus_per_node: int,
               window: float, scope: str = "process") -> tuple[float, float]:
    """(exposed, total) of DDP-style buckets produced evenly over ``window`` seconds of backward.

    Equal-sized buckets make the finish time of the communication stream ``max_i(ready_i + sum_{j>=i} t_j)``
    linear in i between the first buckets and the last, so checking the first two and the last bucket gives
    what :func:`gpucomm.advisor.cost.overlapped_exposed_s` would, without a loop over thousands of buckets.
    """
    sizes = cost.bucket_sizes(int(grads)) if grads < 64 * cost.DDP_BUCKET_CAP_BYTES else None
    if sizes is not None:
        times = [_group_s(profile, op, s, n, per_node, gpus_per_node, scope) for s in sizes]
        return cost.overlapped_exposed_s(sizes, times, window), sum(times)
    first, cap = cost.DDP_FIRST_BUCKET_BYTES, cost.DDP_BUCKET_CAP_BYTES
    full, last = divmod(grads - first, cap)
    t_first = _group_s(profile, op, first, n, per_node, gpus_per_node, scope)
    t_cap = _group_s(profile, op, cap, n, per_node, gpus_per_node, scope)
    t_last = _group_s(profile, op, last, n, per_node, gpus_per_node, scope) if last else 0.0
    total = t_first + full * t_cap + t_last
    ready_first = window * first / grads
    ready_second = window * (first + cap) / grads
    end = max(ready_first + total, ready_second + total - t_first, window + (t_last or t_cap))
    return max(0.0, end - window), total


def tp_exposed_s(all_reduce_s: float, gemm_fwd_s: float, tp: int, ac: str, arch: Architecture,
                 overlap: bool) -> float:
    """One layer's exposed tensor-parallel communication per micro-batch (module docstring, **Tensor parallel**).

    Forward runs two all-reduce equivalents (the sequence-parallel all-gather before the QKV and the first MLP
    matmul, the reduce-scatter after the output projection and the second MLP matmul), backward two more;
    full recomputation repeats the forward's two, ``op`` one (torchtitan keeps the reduce-scatter outputs and
    recomputes the all-gathers).  Serial (``overlap`` False): all of them are exposed.  Overlapped (Megatron-Core's
    ``--tp-comm-overlap``, PyTorch's async TP): each collective is split into ``tp`` chunks pipelined against
    the GEMM it feeds or drains, so the GEMM hides ``(tp - 1) / tp`` of its own time worth of communication —
    the forward's collectives behind the forward GEMMs (and the recomputed ones), the backward's behind the
    backward GEMMs (twice the forward's) — and only the excess is exposed.
    """
    if ac == "full":
        redo, extra = 1.0, 2.0
    elif ac == "op":
        mm = arch.layer_matmuls()
        redo = sum(i * o for k, (_, i, o) in enumerate(mm) if k % 2) / sum(i * o for _, i, o in mm)
        extra = 1.0
    else:
        redo, extra = 0.0, 0.0
    fwd_c, bwd_c = (2.0 + extra) * all_reduce_s, 2.0 * all_reduce_s
    if not overlap:
        return fwd_c + bwd_c
    hide = (tp - 1) / tp
    return max(0.0, fwd_c - (1.0 + redo) * gemm_fwd_s * hide) + max(0.0, bwd_c - 2.0 * gemm_fwd_s * hide)


def gathered_exposed_s(ag: float, rs: float, fwd: float, bwd: float, units: int, micro_batches: int,
                       reshard: str) -> tuple[float, float]:
    """(exposed, total) of a weight-sharding scheme's gathers per step (module docstring, **Data parallel**).

    Per unit (layer), prefetched one ahead: the first unit's gather and the last one's reduce-scatter are
    exposed (``(ag + rs) / units``), and whatever communication exceeds the compute it hides behind.
    ``reshard`` says how often: ``fwd`` gathers for every micro-batch's forward and again for its backward,
    ``bwd`` once per micro-batch, ``step`` once per step (and reduce-scatters once per step).
    """
    edge = (ag + rs) / max(1, units)
    if reshard == "fwd":
        per = max(0.0, ag - fwd) + max(0.0, ag + rs - bwd) + edge
        return micro_batches * per, micro_batches * (2 * ag + rs)
    if reshard == "bwd":
        per = max(0.0, ag - fwd) + max(0.0, rs - bwd) + edge
        return micro_batches * per, micro_batches * (ag + rs)
    return max(0.0, ag - fwd) + max(0.0, rs - bwd) + edge, ag + rs


def step_time(job: Job, layout: Layout, measured: ComputeParts | None = None) -> StepTime:
    """Predicted step of ``layout`` for ``job`` (module docstring).  ``measured``: compute from measured whole
    steps (:mod:`gpucomm.advisor.measured`) instead of the job's compute source
    (:func:`gpucomm.advisor.compute.source_for`: a measured compute profile, or the datasheet model)."""
    if measured is not None:
        return _assemble(job, layout, measured)
    return _assemble(job, layout, source_for(job).parts(job, layout))


def _assemble(job: Job, layout: Layout, parts: ComputeParts) -> StepTime:
    """The step from one micro-batch's compute: stages, bubble, TP/CP/PP/DP communication, the wrapper, the
    optimizer (module docstring)."""
    arch, L, profile = job.arch, layout, job.profile
    seq, global_batch, gpus_per_node = job.seq, job.global_batch, job.gpus_per_node
    weight_bytes, grad_bytes = job.precision.compute_bytes, job.precision.grad_bytes
    h, tp = arch.hidden, L.tp
    tokens = L.mb * seq / L.cp
    m = global_batch // (L.dp * L.mb)
    share = job.colocated  # participants sharing a device run one after another
    t_mb, t_head, t_emb = parts.t_mb * share, parts.t_head * share, parts.t_embedding * share
    t_layer = max(0.0, t_mb - t_head - t_emb) / parts.per_stage
    scope = "local" if L.one_process else "process"

    intra, _ = _links(profile)
    act = tokens * h * _ACT_BYTES
    tp_layer = 0.0
    if tp > 1:
        ar = _group_s(profile, "all_reduce", act, tp, tp, gpus_per_node)  # inside a machine; measured if calibrated
        tp_layer = tp_exposed_s(ar, parts.gemm_fwd_s, tp, L.ac, arch, L.tp_overlap)
    cp_layer = 0.0
    if L.cp > 1:
        kv = L.cp * tokens * 2 * arch.kv_dim / tp * _ACT_BYTES  # K and V of the whole sequence
        ring = 3 * _group_s(profile, "all_gather", kv, L.cp, gpus_per_node // tp, gpus_per_node)
        cp_layer = max(0.0, ring - 3 * parts.attn_fwd_s)

    stages = L.stage_layers(arch.layers)
    per_layer = t_layer + tp_layer + cp_layer
    times = [n * per_layer + (t_head if r == len(stages) - 1 else 0.0) + (t_emb if r == 0 else 0.0)
             for r, n in enumerate(stages)]
    host = [n * parts.host_layer_s for n in stages]  # the host's time to issue each stage's layers
    if L.pp > 1:  # micro-batches synchronise the stages: each slot takes the longer of device and host
        times = [max(t, hst) for t, hst in zip(times, host, strict=True)]
    slot = max(times)
    slowest = times.index(slot)
    bubble = (sum(times) - slot) / L.vpp if L.pp > 1 else 0.0
    p2p = 0.0
    if L.pp > 1:
        crosses = tp * L.cp * L.dp >= gpus_per_node and profile.inter is not None
        bw = (profile.inter.bandwidth_gbps * 1e9 / gpus_per_node) if crosses else intra[0]
        alpha = profile.inter.alpha_us * 1e-6 if crosses else intra[1]
        p2p = 2 * L.vpp * (m + L.pp - 1) * (act / tp / bw + alpha)
    t_slow = slot - stages[slowest] * (tp_layer + cp_layer)  # the slowest stage's compute per micro-batch

    # data parallel, over the heaviest stage's parameters
    stage_params = max(memory_stage_params(arch, L, r)[0] for r in {0, len(stages) - 1, slowest}) / tp
    n = L.dp * L.cp
    per_node = max(1, gpus_per_node // tp)
    grads = stage_params * grad_bytes
    fwd, bwd = t_slow / 3.0, 2.0 * t_slow / 3.0
    unit = max(stages)  # layers a sharded stage gathers one by one
    dp_exposed = dp_total = 0.0
    if n > 1 and L.wrap == "dataparallel":
        dp_total = sum(dataparallel_parts(job, L).values())
        dp_exposed = dp_total + (L.dp - 1) * parts.loss_s  # device 0 also runs every other replica's loss
    elif n > 1:
        if L.shard in ("none", "zero1", "zero2"):
            op = "all_reduce" if L.shard == "none" else "reduce_scatter"
            dp_exposed, dp_total = _buckets_s(profile, op, grads, n, per_node, gpus_per_node, bwd, scope)
            if L.shard != "none":
                ag = _group_s(profile, "all_gather", stage_params * weight_bytes, n, per_node, gpus_per_node)
                dp_exposed += max(0.0, ag - fwd) if L.ag_overlap else ag  # overlapped with the next forward
                dp_total += ag
        else:
            shard = shard_size(L, gpus_per_node)
            g_node = per_node if L.shard != "hsdp" else shard
            ag = _group_s(profile, "all_gather", stage_params * weight_bytes, shard, g_node, gpus_per_node)
            rs = _group_s(profile, "reduce_scatter", grads, shard, g_node, gpus_per_node)
            dp_exposed, dp_total = gathered_exposed_s(ag, rs, fwd, bwd, unit, m, L.regather)
            if L.shard == "hsdp" and n > shard:
                ar = _group_s(profile, "all_reduce", grads / shard, n // shard, 1, gpus_per_node)
                dp_exposed += max(0.0, ar - bwd)
                dp_total += ar

    if parts.fixed_s is None:
        local = stage_params / (shard_size(L, gpus_per_node) if L.shard != "none" else 1)
        opt = source_for(job).optimizer_s(job, local).value
    else:
        opt = parts.fixed_s * share
    wc = wrappers.cost(profile, L)
    compute = m * t_slow + opt
    overhead = wc.per_device_s * n + wc.slowdown * compute
    host_wait = 0.0
    if L.pp == 1:  # the host runs ahead across the whole step: the device waits only for what it lacks
        host_wait = max(0.0, m * host[0] * share - (m * slot + opt))
    step = m * slot + bubble + p2p + dp_exposed + opt + overhead + host_wait
    tp_s, cp_s = m * stages[slowest] * tp_layer, m * stages[slowest] * cp_layer
    return StepTime(step_s=step, compute_s=compute, tp_s=tp_s, cp_exposed_s=cp_s, bubble_s=bubble,
                    p2p_s=p2p, dp_exposed_s=dp_exposed, dp_total_s=dp_total, optimizer_s=opt, micro_batches=m,
                    efficiency=parts.efficiency, overhead_s=overhead, extrapolated=parts.extrapolated,
                    host_wait_s=host_wait)


def dataparallel_parts(job: Job, layout: Layout) -> dict[str, float]:
    """``torch.nn.DataParallel``'s communication per step, in its order, none of it overlapped (seconds):
    replicate the module from device 0 (a broadcast of the stored weights), scatter the inputs (int64 token ids),
    gather every replica's outputs onto device 0 (the whole batch's logits, in the compute dtype), scatter their
    gradient back, and after the whole backward reduce the gradients onto device 0."""
    arch, prec, g = job.arch, job.precision, layout.dp
    profile, n_local = job.profile, job.gpus_per_node
    inputs = job.global_batch * job.seq * 8
    outputs = job.global_batch * job.seq * arch.vocab * prec.compute_bytes
    args = (g, g, n_local, "local")
    return {"broadcast weights": _group_s(profile, "broadcast", arch.params() * prec.weight_bytes, *args),
            "scatter inputs": _group_s(profile, "scatter", inputs, *args),
            "gather logits": _group_s(profile, "gather", outputs, *args),
            "scatter logit grads": _group_s(profile, "scatter", outputs, *args),
            "reduce grads": _group_s(profile, "reduce", arch.params() * prec.grad_bytes, *args)}
