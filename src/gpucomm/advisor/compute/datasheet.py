"""The datasheet compute source: a micro-batch's compute from peak FLOP/s, HBM bandwidth and stated constants.

This is the compute of every GPU without a measured compute profile (``gpucomm advise`` says "compute not
measured"): A100, V100, PCIe parts, and any GPU until a profile measured by ``gpucomm measure`` ships for it.
Physics with few constants, each stated here (not fitted to the published runs the advisor is checked
against; ``gpucomm advise --calibrate`` replaces the GEMM efficiency with the user's own).

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

**Optimizer**: memory-bound, :data:`gpucomm.advisor.cost.OPTIMIZER_BYTES_TOUCHED` bytes per local parameter
(Adam's) at the HBM bandwidth.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gpucomm.advisor import cost
from gpucomm.advisor.compute.parts import ComputeParts, Lookup
from gpucomm.advisor.job import KERNELS, Job
from gpucomm.advisor.layout import Layout
from gpucomm.advisor.memory import activation_terms
from gpucomm.models import Architecture

__all__ = ["ATTENTION_EFFICIENCY", "EW_PASSES", "GEMM_DIM0", "GEMM_EFFICIENCY", "GEMM_TOKENS0",
           "LOSS_BYTES_PER_LOGIT", "LOSS_BYTES_PER_LOGIT_UNFUSED", "Datasheet", "UnfusedBytes", "optimizer_s",
           "parts", "size_factor", "unfused_layer_bytes"]

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


def parts(job: Job, layout: Layout) -> ComputeParts:
    """One micro-batch of ``layout`` on one GPU from the datasheet (module docstring).  ``job.efficiency``
    overrides the GEMM efficiency (a calibrated value; the size factor still applies); ``job.kernels``:
    "fused" (today's stack) or "unfused" (Megatron-LM 2019's, :func:`unfused_layer_bytes`)."""
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
    return ComputeParts(t_mb=t_mb, t_head=3 * head_fwd / (peak * eff) + t_loss, gemm_fwd_s=gemm_fwd / per_stage
                        / (peak * eff), attn_fwd_s=attn_fwd / per_stage / (peak * attn_eff), per_stage=per_stage,
                        loss_s=t_loss, efficiency=eff)


def optimizer_s(job: Job, params: float) -> float:
    """One optimizer step over ``params`` local parameters: Adam's bytes at the HBM bandwidth (seconds)."""
    return cost.OPTIMIZER_BYTES_TOUCHED["adam"] * params / (job.profile.memory_bw_gbps * 1e9)


class Datasheet:
    """The datasheet compute source (:class:`gpucomm.advisor.compute.source.ComputeSource`)."""

    name = "datasheet"
    measured = False

    def parts(self, job: Job, layout: Layout) -> ComputeParts:
        return parts(job, layout)

    def optimizer_s(self, job: Job, params: float) -> Lookup:
        return Lookup(value=optimizer_s(job, params))

    def margin_bytes(self, job: Job, layout: Layout) -> Lookup | None:
        """Not measured: the planner's assumed margin applies."""
        return None

    def assumptions(self, job: Job) -> list[str]:
        p = job.profile
        eff = job.efficiency or p.gemm_efficiency or GEMM_EFFICIENCY
        return [f"compute not measured: datasheet peak x GEMM efficiency {eff:.2f} "
                f"({p.sources.get('gemm_efficiency', 'the planner default')}) x a size factor; flash attention at "
                f"{p.attention_efficiency or ATTENTION_EFFICIENCY:.2f} of peak; optimizer "
                f"{cost.OPTIMIZER_BYTES_TOUCHED['adam']} B per parameter at {p.memory_bw_gbps:g} GB/s"]
