"""Time per optimizer step of one layout: compute, tensor/context/pipeline/data-parallel communication.

Physics with few constants, each stated here (they are not fitted to the published runs the advisor is
checked against; ``gpucomm advise --calibrate`` replaces the compute efficiency with the user's own).

**Compute** of one micro-batch on one pipeline stage (``tokens = mb x seq / cp``):

* attention's FLOPs run at the flash-attention rate (:data:`ATTENTION_EFFICIENCY`, or the profile's);
* matrix FLOPs: forward ``2 x`` (the stage's layer weights / tp) per token, attention ``2 s h / tp`` per token
  (``Q K^T`` and ``A V`` under a causal mask: half of the ``4 s h`` a full mask costs), the head ``2 V h / tp``
  on the last stage; backward twice the forward; full recomputation repeats the layers' forward, selective
  (Megatron's) repeats attention's, ``op`` (torchtitan's per-op policy, :mod:`gpucomm.advisor.memory`)
  repeats every second matmul of the block (Llama: ``wk``, ``wo``, ``w3``; 37% of Llama-3-8B's layer
  matmul FLOPs) and keeps attention's output.  They run at ``peak x GEMM_EFFICIENCY x size_factor`` where
  ``size_factor = 1 / (1 + GEMM_DIM0 / (h / tp) + GEMM_TOKENS0 / tokens)``: narrow matrices (wide TP, small
  models) and short micro-batches fill fewer tiles and waves (the default curve calibration replaces);
* the loss: :data:`LOSS_BYTES_PER_LOGIT` bytes per vocabulary entry per token at the HBM bandwidth (small
  models spend a visible share of the step here: the logits outnumber a layer's activations);
* memory-bound work (norms, residuals, activation functions, dropout, rotary, softmax statistics): the
  stored activations without recomputation (:func:`gpucomm.advisor.memory.activation_terms`: Korthikanti's
  34 h bytes per token and layer for GPT, 41 h for Llama-3-8B; / tp with sequence parallel) written in
  forward and read and written again in backward — ``EW_PASSES x stored / tp`` bytes at the HBM bandwidth
  (one more pass under full or ``op`` recomputation, which run the memory-bound forward again).  This is why an H100 (989 TFLOP/s over 3.35 TB/s)
  reaches a lower MFU than an A100 (312 over 2.04) on the same model.

**Kernels** (``kernels``, a property of the software stack, default ``"fused"``): everything above assumes
today's stack — flash attention (the ``s x s`` scores never reach memory, the masked half is skipped),
fused LayerNorm/bias/GeLU/dropout/residual kernels, sequence parallelism.  ``"unfused"`` is the stack of
Megatron-LM 2019 (Shoeybi et al., arXiv:1909.08053; ``mpu/transformer.py`` at its September 2019
commit), which :func:`unfused_layer_bytes` walks op by op: the scores are materialised in 16 bits and each of
scaling, masking (a multiply and a subtract), softmax and dropout is its own pass over them; bias adds,
dropouts, residual adds and the head-major copies of Q, K, V and of the context are separate kernels; the
ops outside the tensor-parallel region run replicated at full width on every TP rank (sequence
parallelism came in 2022).  Attention's matmuls compute the whole ``s x s`` square (the mask is applied
after), at the GEMM rate or at the bandwidth their scores move at, whichever is slower (with 96-wide heads
a V100's ``Q K^T`` moves more bytes per FLOP than its peak/bandwidth ratio allows).  The loss upcasts the
logits and runs :data:`LOSS_BYTES_PER_LOGIT_UNFUSED` bytes of elementwise passes per logit.  Megatron-LM's
fused softmax and bias-GeLU kernels landed in September 2020 ("Various speed optimizations", 51a2e6b);
the SC21 paper's runs use them.

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

**Optimizer**: memory-bound, :data:`gpucomm.advisor.cost.OPTIMIZER_BYTES_TOUCHED` bytes per local parameter.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gpucomm.advisor import cost, wrappers
from gpucomm.advisor.fits import collective_time_s
from gpucomm.advisor.hardware import HardwareProfile
from gpucomm.advisor.job import KERNELS, Job
from gpucomm.advisor.layout import Layout
from gpucomm.advisor.memory import activation_terms, shard_size
from gpucomm.advisor.memory import stage_params as memory_stage_params
from gpucomm.models import Architecture

__all__ = ["ATTENTION_EFFICIENCY", "EW_PASSES", "GEMM_DIM0", "GEMM_EFFICIENCY", "GEMM_TOKENS0", "KERNELS",
           "LOSS_BYTES_PER_LOGIT", "LOSS_BYTES_PER_LOGIT_UNFUSED", "StepTime", "UnfusedBytes", "size_factor",
           "step_time", "unfused_layer_bytes"]

GEMM_EFFICIENCY = 0.65
"""Fraction of the dense datasheet peak that large 16-bit GEMMs sustain in training when a profile states
none (``HardwareProfile.gemm_efficiency``): clock limits under sustained load, kernel tails, flash attention's
lower rate.  Large-model runs on A100 reach 56% MFU with selective recomputation after their pipeline
bubble and tensor-parallel communication (Korthikanti et al. 2022, 530B and 1T rows), so their GEMMs
sustain about 0.65 of peak.  Assumed; measured records replace it (``--calibrate``)."""
GEMM_DIM0 = 128.0
"""Width (elements) at which a GEMM dimension costs one extra tile's worth: 128 is the tile edge of the
Ampere/Hopper tensor-core kernels, so ``h / tp = 128`` runs at half the large-GEMM rate."""
GEMM_TOKENS0 = 128.0
"""The same for the token dimension of a micro-batch (``mb x seq / cp``)."""
ATTENTION_EFFICIENCY = 0.60
"""Fraction of peak that causal flash attention (forward + backward) sustains when a profile states none
(``HardwareProfile.attention_efficiency``): FlashAttention-2 reaches up to 72% of an A100's peak forward +
backward (Dao 2023, "FlashAttention-2", abstract); causal masking and head dim 128 run below that best case."""
EW_PASSES = 3.0
"""Passes of memory-bound traffic over the 34 h stored bytes per token and layer: written forward, read and
written (as gradient) backward."""
LOSS_BYTES_PER_LOGIT = 16.0
"""Softmax cross-entropy over fp32 logits: written (upcast), read for the softmax statistics, the gradient
written and read by the head's backward — four passes of 4 bytes per logit (vocabulary entry per token)."""
LOSS_BYTES_PER_LOGIT_UNFUSED = 60.0
"""Megatron-LM 2019's loss per logit (``pretrain_gpt2.py``: ``output.float()``; ``mpu/cross_entropy.py``):
forward the fp16 -> fp32 copy (2 + 4 bytes), ``clone`` (4 + 4), ``max`` (4), ``sub_`` (4 + 4), ``exp``
(4 + 4), ``sum`` (4), ``div_`` (4 + 4) = 46; backward ``mul_`` (4 + 4) and the cast back to fp16 (4 + 2)
= 14."""
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

    @property
    def exposed_comm_s(self) -> float:
        return self.tp_s + self.cp_exposed_s + self.p2p_s + self.dp_exposed_s

    @property
    def comm_s(self) -> float:
        return self.tp_s + self.cp_exposed_s + self.p2p_s + self.dp_total_s


@dataclass(frozen=True, kw_only=True, slots=True)
class ComputeParts:
    """One micro-batch on one GPU, as a step is assembled from it (seconds)."""

    t_mb: float
    """Forward + backward (+ recomputation) of ``per_stage`` layers and of the head with its loss."""
    t_head: float
    """The head and the loss, inside ``t_mb`` (the last pipeline stage runs them)."""
    gemm_fwd_s: float
    """One layer's forward GEMMs: what overlapped tensor-parallel communication can hide behind."""
    attn_fwd_s: float
    """One layer's attention forward: what context-parallel communication hides behind."""
    per_stage: int
    """Layers ``t_mb`` counts."""
    fixed_s: float | None = None
    """A measured per-step cost (optimizer and per-step host work) replacing the optimizer estimate; None:
    estimated from the bytes the optimizer touches."""
    loss_s: float = 0.0
    """The loss alone, per micro-batch (DataParallel runs it on device 0 for every replica)."""
    efficiency: float = 0.0
    """The GEMM efficiency used (0 for measured compute)."""


def size_factor(h_per_gpu: float, tokens: float) -> float:
    """The default efficiency curve's shape (see :data:`GEMM_DIM0`)."""
    return 1.0 / (1.0 + GEMM_DIM0 / h_per_gpu + GEMM_TOKENS0 / tokens)


@dataclass(frozen=True, kw_only=True, slots=True)
class UnfusedBytes:
    """Memory traffic of one layer per token on one GPU in the unfused stack, bytes (reads + writes)."""

    fwd: float
    """Forward elementwise kernels outside the score chain (full width outside the TP region)."""
    bwd: float
    """Their backward."""
    scores_fwd: float
    """Forward elementwise passes over the ``s x s`` scores (scale, mask, softmax, dropout)."""
    scores_bwd: float
    """Their backward."""
    scores_gemm_fwd: float
    """The score bytes attention's two forward matmuls move (``Q K^T`` writes them, ``A V`` reads them)."""
    scores_gemm_bwd: float
    """The same for the four backward matmuls (dP written, P read for dV, dS read twice for dQ and dK)."""


def unfused_layer_bytes(arch: Architecture, seq: int, tp: int) -> UnfusedBytes:
    """One layer's memory-bound traffic per token in Megatron-LM 2019's unfused layer, op by op.

    Units: ``h`` = hidden (16-bit elements: 2 bytes each), ``q = h + 2 kv`` the QKV width, ``f`` the MLP
    width, ``S = 2 (a / tp) s`` bytes = one pass over a token's scores.  Reads + writes per kernel:

    * outside the TP region, full width on every rank: forward two LayerNorms (apex's fused kernel: read
      x, write y, ``4h`` each), two residual adds (``6h``), with biases the row-parallel layers' bias adds
      after the all-reduce (``4h`` each), with dropout (GPT) two dropouts (read, write, 1-byte mask:
      ``5h``) = 38h for GPT; backward two LayerNorms (read dy and x, write dx: ``6h``), two gradient
      accumulations where the residual branches (``6h``), two bias gradients (``2h``), two dropouts
      (``5h``) = 38h;
    * inside the TP region (/ tp): forward the QKV bias add (``4q``), the head-major copies of Q, K, V that
      ``torch.matmul`` makes of the permuted views (``4q``), the context back to token-major (``4h``), the
      MLP's first bias add (``4f``) and GeLU (JIT-fused: ``4f``; SwiGLU ``10f``) = 60h for GPT; backward
      the QKV bias gradient (``2q``), the concatenation of the Q, K, V gradients (``4q``), the context
      gradient copy (``4h``), the MLP bias gradient (``2f``), GeLU's backward (read dy and x, write dx:
      ``6f``; SwiGLU ``16f``) = 54h for GPT;
    * the scores: forward the scaling ``/ sqrt(d)`` (``2S``), the mask as ``x * m - 10000 (1 - m)`` (a
      multiply and a subtract, ``2S`` each), softmax (``2S``), dropout (``2.5S``) = 10.5S; backward
      dropout (``2.5S``), softmax (read dy and y, write dx: ``3S``), the mask's multiply (``2S``), the
      scaling (``2S``) = 9.5S (without dropout 8S and 7S).  The matmuls move ``2S`` forward and ``4S``
      backward besides.

    Libraries' own names: ``FusedLayerNorm``, ``F.linear`` (3-D input: matmul, then ``+= bias``),
    ``torch.nn.Softmax``, ``torch.nn.Dropout``; see the module docstring for the commit.
    """
    h, f, a = arch.hidden, arch.ffn_hidden, arch.heads
    q = h + 2 * arch.kv_dim
    bias, dropout = arch.biases, arch.ffn_kind == "gelu-4h"
    swiglu = arch.ffn_kind == "swiglu"
    f_up = 2 * f if swiglu else f
    fwd_out = 2 * 4 * h + 2 * 6 * h + (2 * 4 * h if bias else 0) + (2 * 5 * h if dropout else 0)
    bwd_out = 2 * 6 * h + 2 * 6 * h + (2 * 2 * h if bias else 0) + (2 * 5 * h if dropout else 0)
    fwd_in = (4 * q if bias else 0) + 4 * q + 4 * h + (4 * f_up if bias else 0) + (10 * f if swiglu else 4 * f)
    bwd_in = (2 * q if bias else 0) + 4 * q + 4 * h + (2 * f_up if bias else 0) + (16 * f if swiglu else 6 * f)
    S = 2.0 * (a / tp) * seq
    return UnfusedBytes(fwd=fwd_out + fwd_in / tp, bwd=bwd_out + bwd_in / tp,
                        scores_fwd=(10.5 if dropout else 8.0) * S, scores_bwd=(9.5 if dropout else 7.0) * S,
                        scores_gemm_fwd=2 * S, scores_gemm_bwd=4 * S)


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
    """Predicted step of ``layout`` for ``job`` (module docstring).  ``measured``: compute from measured steps
    (:mod:`gpucomm.advisor.measured`) instead of the datasheet estimate below; ``job.efficiency`` overrides the
    GEMM efficiency (a calibrated value; the size factor still applies); ``job.kernels``: "fused" (today's
    stack) or "unfused" (Megatron-LM 2019's, :func:`unfused_layer_bytes`)."""
    if measured is not None:
        return _assemble(job, layout, measured)
    arch, profile, seq = job.arch, job.profile, job.seq
    efficiency, dtype, kernels = job.efficiency, job.dtype, job.kernels
    if kernels not in KERNELS:
        raise ValueError(f"kernels={kernels!r}: expected one of {'|'.join(KERNELS)}")
    L = layout
    peak = profile.peak_flops(dtype)
    if peak is None or not profile.memory_bw_gbps:
        raise ValueError(f"profile {profile.name!r}: no {dtype} peak or HBM bandwidth to predict a GPU step "
                         f"from; use a GPU profile (--list-hardware)")
    h, tp = arch.hidden, L.tp
    tokens = L.mb * seq / L.cp
    per_stage = math.ceil(arch.layers / L.pp)

    layer_mm = arch.matmul_params() - arch.vocab * h  # every layer's matrix weights
    gemm_fwd = 2.0 * layer_mm / arch.layers / tp * tokens * per_stage
    attn_fwd = 2.0 * seq * h / tp * tokens * per_stage
    head_fwd = 2.0 * arch.vocab * h / tp * tokens
    mm = 3 * (gemm_fwd + head_fwd)
    attn = 3 * attn_fwd
    stored = sum(activation_terms(arch, "none").values())  # bytes per token and h: 34 for GPT, 41 Llama-3-8B
    ew_bytes = EW_PASSES * stored * h / tp * tokens * per_stage + LOSS_BYTES_PER_LOGIT * arch.vocab / tp * tokens
    if L.ac == "full":
        mm += gemm_fwd
        attn += attn_fwd
        ew_bytes += stored * h / tp * tokens * per_stage
    elif L.ac == "selective":
        attn += attn_fwd
    elif L.ac == "op":  # every second matmul of the block and all memory-bound work run again
        mm += 2.0 * sum(i * o for k, (_, i, o) in enumerate(arch.layer_matmuls()) if k % 2) / tp * tokens \
            * per_stage
        ew_bytes += stored * h / tp * tokens * per_stage
    if efficiency is None:
        efficiency = profile.gemm_efficiency or GEMM_EFFICIENCY
    eff = efficiency * size_factor(h / tp, tokens)
    attn_eff = profile.attention_efficiency or ATTENTION_EFFICIENCY
    bw = profile.memory_bw_gbps * 1e9
    if kernels == "fused":
        t_attn = attn / (peak * attn_eff)
    else:  # module docstring, **Kernels**: the whole square at the GEMM rate or its score bandwidth
        u = unfused_layer_bytes(arch, seq, tp)
        rec_scores = L.ac in ("full", "selective")  # attention's forward runs again
        ew_layer = u.fwd + u.bwd + u.scores_fwd + u.scores_bwd
        ew_layer += (u.fwd if L.ac in ("full", "op") else 0.0) + (u.scores_fwd if rec_scores else 0.0)
        ew_bytes = ew_layer * tokens * per_stage + LOSS_BYTES_PER_LOGIT_UNFUSED * arch.vocab / tp * tokens
        square = 2.0 * attn  # attn counts the causal half, recomputation included
        gemm_bytes = (u.scores_gemm_fwd * (2 if rec_scores else 1) + u.scores_gemm_bwd) * tokens * per_stage
        t_attn = max(square / (peak * eff), gemm_bytes / bw)
    t_mb = mm / (peak * eff) + t_attn + ew_bytes / bw

    # The compute above, read as parts (the head with its loss on the last stage, one layer's forward GEMMs
    # and attention), so that stages of different sizes and overlapped communication can be priced from it.
    loss_bytes = (LOSS_BYTES_PER_LOGIT if kernels == "fused" else LOSS_BYTES_PER_LOGIT_UNFUSED) * arch.vocab / tp
    t_loss = loss_bytes * tokens / bw
    parts = ComputeParts(t_mb=t_mb, t_head=3 * head_fwd / (peak * eff) + t_loss, gemm_fwd_s=gemm_fwd / per_stage
                         / (peak * eff), attn_fwd_s=attn_fwd / per_stage / (peak * attn_eff), per_stage=per_stage,
                         loss_s=t_loss, efficiency=eff)
    return _assemble(job, layout, parts)


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
    t_mb, t_head = parts.t_mb * share, parts.t_head * share
    t_layer = max(0.0, t_mb - t_head) / parts.per_stage
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
    times = [n * per_layer + (t_head if r == len(stages) - 1 else 0.0) for r, n in enumerate(stages)]
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
        opt = cost.OPTIMIZER_BYTES_TOUCHED["adam"] * local / (profile.memory_bw_gbps * 1e9)
    else:
        opt = parts.fixed_s * share
    wc = wrappers.cost(profile, L)
    compute = m * t_slow + opt
    overhead = wc.per_device_s * n + wc.slowdown * compute
    step = m * slot + bubble + p2p + dp_exposed + opt + overhead
    tp_s, cp_s = m * stages[slowest] * tp_layer, m * stages[slowest] * cp_layer
    return StepTime(step_s=step, compute_s=compute, tp_s=tp_s, cp_exposed_s=cp_s, bubble_s=bubble,
                    p2p_s=p2p, dp_exposed_s=dp_exposed, dp_total_s=dp_total, optimizer_s=opt, micro_batches=m,
                    efficiency=parts.efficiency, overhead_s=overhead)


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
