"""Memory per GPU of one layout, term by term.

**Model states** (ZeRO, Rajbhandari et al. SC'20): with ``w``, ``g`` bytes per weight and gradient and ``K``
bytes of optimizer state per parameter (mixed-precision Adam: 2, 2, 12 — fp32 master, two moments), a GPU
holds the parameters of its pipeline stage split ``tp`` ways, and sharding over the data-parallel group of
``N = dp x cp`` GPUs divides optimizer state (zero1 and up), gradients (zero2 and up) and weights (zero3,
fsdp; hsdp shards over the data-parallel GPUs of one machine only).  Stage 0 holds the embedding and the
first ``ceil(L / pp)`` layers; the last stage the head; the heavier of the two is reported.

**Activations** per layer and micro-batch, 16-bit, derived tensor by tensor (:func:`activation_terms`) the
way Korthikanti et al. 2022 ("Reducing Activation Recomputation in Large Transformer Models", Sec. 4.1)
derive their ``34 s b h + 5 a s^2 b`` for GPT — ``s`` tokens per GPU after context parallel, ``b``
micro-batch, ``h`` hidden, ``kv`` the K/V width (``kv_heads x head_dim``), ``f`` the MLP width, ``a`` heads,
``t`` tensor parallel with sequence parallel (every term divides by t).  In units of ``s b h`` bytes:

* both kinds, each tensor kept because a backward formula reads it:
  - the two norms' inputs ``2 + 2``: LayerNorm and RMSNorm backward recompute the normalisation from them;
  - the QKV projection's input ``2``: the weight gradients of ``W_q``, ``W_k``, ``W_v`` are ``input^T dY``;
  - Q ``2`` and K ``2 kv / h``: the gradient of each operand of ``Q K^T`` is the other times the incoming one;
  - V ``2 kv / h``: the gradient of the probabilities in ``A V`` needs V;
  - the attention output ``2``: the output projection's input (its weight gradient), and what flash
    attention keeps (with its logsumexp) to recompute the probabilities in backward;
  - the MLP's input ``2``: the weight gradient of its first matrix (of ``w1`` and ``w3`` for SwiGLU);
* without flash attention, the scores: softmax output ``2 a s / h`` (softmax backward reads it), plus, with
  dropout, its mask ``a s / h`` (1 byte) and output ``2 a s / h`` (the input of ``A V``);
* GPT (``gelu-4h``, trained with dropout as Megatron's GPT is): GeLU's input ``2 f / h`` (its derivative) and
  output ``2 f / h`` (the second matrix's input), two dropout masks ``1 + 1`` (after attention and after the
  MLP) — for f = 4h and kv = h exactly Korthikanti's 34 (11 attention + 19 MLP + 4 norms);
* Llama (``swiglu``, no dropout): the gate ``w1 x`` ``2 f / h`` (SiLU's derivative), SiLU's output and the up
  projection ``w3 x`` ``2 f / h`` each (the product's gradient w.r.t. each factor is the other), the product
  ``2 f / h`` (``w2``'s input): ``2 + 8 f / h``.  For Llama-3-8B (f = 3.5 h, kv = h / 4): 4 + 7 + 30 = 41.
  (torchtitan expands K and V to every head before SDPA, ``repeat_kv``, so without checkpointing it stores
  them at full width, ``+ 3`` for 8B; counted at the GQA width here, as flash attention's native GQA stores.)

By checkpointing mode:

* ``none``: the terms above.  Flash attention (``flash=True``, the default: every run in the published
  set after 2022 uses it) never stores the scores, which is exactly what Korthikanti's *selective*
  recomputation achieves, so
* ``selective`` (Megatron, Korthikanti: recompute the attention core only): the same terms without scores;
* ``op`` (torchtitan's default selective AC for Llama, ``selective_ac_option = "op"``: a checkpoint around
  every block whose policy saves the outputs of ``aten.mm`` and of the SDPA kernels and recomputes everything
  else, except that every second ``mm`` of the block is recomputed too): the block's input ``2``, the outputs
  of the 1st, 3rd, ... matmul of :meth:`~gpucomm.models.Architecture.layer_matmuls` (Llama: ``wq`` ``2``,
  ``wv`` ``2 kv / h``, ``w1`` ``2 f / h``, ``w2`` ``2``), the attention output ``2`` and its fp32 logsumexp
  ``4 a / h``.  Llama-3-8B: 15.53;
* ``full``: only each layer's input, ``2``, plus one layer's full working set while it is recomputed.

A 1F1B pipeline's first stage holds ``min(pp, micro-batches)`` micro-batches in flight; the interleaved
schedule ``(1 + (pp - 1) / (pp vpp))`` times that (Narayanan et al. SC21, Sec. 2.2).

**Logits**: the last stage keeps the micro-batch's logits and their gradient, ``s b V / t`` elements of 2
bytes each (bf16; fused or chunked cross-entropy keeps the fp32 temporaries small).

**Buffers**: fsdp/hsdp gather two layers' weights (the current one and the prefetched next) and one layer's
gradients before the reduce-scatter; DeepSpeed's zero3 caps live parameters at ``stage3_max_live_parameters``
(1e9) and its reduce bucket at 5e8 elements (its defaults); zero1/zero2 and DDP keep two 25 MiB buckets.

**Reserve**: :data:`RESERVE_BYTES` for the CUDA context, cuBLAS workspaces, NCCL buffers and allocator
fragmentation — assumed, stated in every output.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gpucomm.advisor.layout import Layout
from gpucomm.models import Architecture

__all__ = ["BUCKET_BYTES", "RESERVE_BYTES", "MemoryTerms", "activation_bytes_per_layer", "activation_terms",
           "memory", "model_state_terms"]

GiB = 2**30
RESERVE_BYTES = 3 * GiB
"""Assumed: CUDA context (~0.5 GiB), cuBLAS/cuDNN workspaces, NCCL channel buffers and caching-allocator
fragmentation together.  Not from a reference file; calibrate by comparing with a measured peak."""
BUCKET_BYTES = 2 * 25 * 2**20
"""Two of DDP's 25 MiB gradient buckets (``bucket_cap_mb=25``; one filling, one in flight)."""
_ZERO3_LIVE_PARAMS = 1e9
_ZERO3_REDUCE_BUCKET = 5e8


@dataclass(frozen=True, kw_only=True, slots=True)
class MemoryTerms:
    """Bytes on the most loaded GPU, by term; :attr:`total` is their sum."""

    params: float
    grads: float
    optimizer: float
    activations: float
    logits: float
    buffers: float
    reserve: float

    @property
    def total(self) -> float:
        return (self.params + self.grads + self.optimizer + self.activations + self.logits + self.buffers
                + self.reserve)

    def as_dict(self) -> dict[str, float]:
        return {k: getattr(self, k) for k in ("params", "grads", "optimizer", "activations", "logits", "buffers",
                                              "reserve")}


def activation_terms(arch: Architecture, ac: str, flash: bool = True, s: float = 0.0) -> dict[str, float]:
    """One layer's stored activations of ``arch``, tensor by tensor, in bytes per ``s b h`` (module doc).

    ``s`` (tokens of one sequence on this GPU) matters only for the score terms, when ``flash`` is False.
    """
    h, a = arch.hidden, arch.heads
    kv_h, f_h = arch.kv_dim / h, arch.ffn_hidden / h
    swiglu = arch.ffn_kind == "swiglu"
    if ac == "full":
        return {"layer input": 2.0}
    if ac == "op":
        terms = {"block input": 2.0}
        terms.update({f"{name} output (kept mm)": 2.0 * out / h
                      for i, (name, _, out) in enumerate(arch.layer_matmuls()) if i % 2 == 0})
        terms["attention output (kept SDPA)"] = 2.0
        terms["attention logsumexp (fp32)"] = 4.0 * a / h
        return terms
    terms = {"norm inputs": 4.0, "QKV input": 2.0, "Q": 2.0, "K": 2.0 * kv_h, "V": 2.0 * kv_h,
             "attention output": 2.0, "MLP input": 2.0}
    if swiglu:
        terms.update({"gate (SiLU input)": 2.0 * f_h, "SiLU output": 2.0 * f_h, "up (w3 output)": 2.0 * f_h,
                      "gate x up (w2 input)": 2.0 * f_h})
    else:
        terms.update({"GeLU input": 2.0 * f_h, "GeLU output": 2.0 * f_h, "dropout masks": 2.0})
    if ac == "none" and not flash:
        terms["scores (softmax output)"] = 2.0 * a * s / h
        if not swiglu:
            terms["scores dropout mask and output"] = 3.0 * a * s / h
    return terms


def activation_bytes_per_layer(s: float, b: float, h: int, a: int, t: int, ac: str, flash: bool = True,
                               arch: Architecture | None = None) -> float:
    """One layer's stored activations, bytes (module docstring).

    Args:
        s: tokens of one sequence on this GPU (after context parallel).
        b: micro-batch (sequences).
        h, a: hidden size and attention heads (taken from ``arch`` when it is given).
        t: tensor-parallel size (with sequence parallel, every term divides by t).
        ac: "none", "selective", "op" or "full".
        flash: attention scores are never stored (flash attention): "none" keeps what "selective" keeps.
        arch: the architecture (GQA, MLP kind and width): the sum of :func:`activation_terms`.  None:
            Korthikanti's GPT formula as published, ``34`` (``+ 5 a s / h`` unless flash) or ``2`` (full).
    """
    if arch is not None:
        return s * b * arch.hidden * sum(activation_terms(arch, ac, flash, s).values()) / t
    if ac == "op":
        raise ValueError("ac='op': what torchtitan's per-op policy keeps depends on the architecture's "
                         "matmuls; pass arch=")
    if ac == "full":
        return 2 * s * b * h / t
    if ac == "selective" or flash:
        return 34 * s * b * h / t
    return s * b * h * (34 + 5 * a * s / h) / t


def model_state_terms(stage: int, params: float, n: int, *, weight_bytes: float, grad_bytes: float,
                      optimizer_bytes: float) -> tuple[float, float, float]:
    """Per-GPU bytes of (weights, gradients, optimizer state) of ``params`` parameters under ZeRO stage 0-3
    sharded over ``n`` GPUs (module docstring): stage 1 shards the optimizer state, 2 the gradients too,
    3 the weights too.  Mixed-precision Adam (2, 2, 12): 16 Psi -> 4 Psi + 12 Psi/N -> 2 Psi + 14 Psi/N
    -> 16 Psi/N, the ZeRO paper's table (Rajbhandari et al. SC'20, Fig. 1)."""
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ValueError(f"n: expected a GPU count >= 1, but got {n!r}")
    if stage not in (0, 1, 2, 3):
        raise ValueError(f"stage: expected a ZeRO stage 0-3, but got {stage!r}")
    return (weight_bytes * params / (n if stage >= 3 else 1), grad_bytes * params / (n if stage >= 2 else 1),
            optimizer_bytes * params / (n if stage >= 1 else 1))


def shard_size(layout: Layout, gpus_per_node: int) -> int:
    """GPUs the model states are sharded over: dp x cp, or for hsdp the data-parallel GPUs of one machine."""
    n = layout.dp * layout.cp
    if layout.shard == "hsdp":
        return max(1, min(n, gpus_per_node // layout.tp))
    return n


def memory(arch: Architecture, layout: Layout, *, global_batch: int, seq: int, gpus_per_node: int,
           weight_bytes: int = 2, grad_bytes: int = 2, optimizer_bytes: int = 12, flash: bool = True,
           reserve_bytes: float = RESERVE_BYTES) -> MemoryTerms:
    """The memory terms of ``layout`` on its most loaded GPU (module docstring)."""
    L = layout
    per_stage = math.ceil(arch.layers / L.pp)
    first = arch.embedding_params() + per_stage * arch.layer_params()
    last = per_stage * arch.layer_params() + arch.norm_params() + (
        arch.head_params() or (arch.vocab * arch.hidden if L.pp > 1 else 0))  # a tied head is a copy there
    stage_params = (arch.params() if L.pp == 1 else max(first, last)) / L.tp
    n = shard_size(L, gpus_per_node)
    stage = {"none": 0, "zero1": 1, "zero2": 2}.get(L.shard, 3)
    params, grads, optimizer = model_state_terms(stage, stage_params, n, weight_bytes=weight_bytes,
                                                 grad_bytes=grad_bytes, optimizer_bytes=optimizer_bytes)

    s = seq / L.cp
    micro_batches = global_batch // (L.dp * L.mb)
    in_flight = min(L.pp, micro_batches)
    if L.vpp > 1:
        in_flight *= 1 + (L.pp - 1) / (L.pp * L.vpp)
    per_layer = activation_bytes_per_layer(s, L.mb, arch.hidden, arch.heads, L.tp, L.ac, flash, arch)
    acts = per_stage * per_layer * in_flight
    if L.ac in ("full", "op"):  # the layer being recomputed holds its full working set (scores unless flash)
        acts += activation_bytes_per_layer(s, L.mb, arch.hidden, arch.heads, L.tp, "none", flash, arch)
    logits = 2 * 2 * s * L.mb * arch.vocab / L.tp

    layer = arch.layer_params() / L.tp
    if L.shard in ("fsdp", "hsdp"):
        buffers = (2 * weight_bytes + grad_bytes) * layer
    elif L.shard == "zero3":
        buffers = min((2 * weight_bytes + grad_bytes) * layer,
                      weight_bytes * _ZERO3_LIVE_PARAMS + grad_bytes * _ZERO3_REDUCE_BUCKET)
    elif L.dp * L.cp > 1:
        buffers = min(BUCKET_BYTES, grads)
    else:
        buffers = 0.0
    return MemoryTerms(params=params, grads=grads, optimizer=optimizer, activations=acts, logits=logits,
                       buffers=buffers, reserve=reserve_bytes)
