"""Memory per GPU of one layout, term by term, as PyTorch holds it: allocated, reserved, and what must fit.

The peak is taken at four moments and the largest wins (terms as at that moment):

* **the loss's forward** (the last micro-batch, still inside ``torch.autocast``): every activation of the
  micro-batches in flight, the logits and the fp32 input and output of ``log_softmax``, and autocast's cast cache
  — every matmul weight's 16-bit copy, checkpointed layers' too;
* **the start of the last micro-batch's backward** (the loss's backward, the first op of backward): every
  activation of the micro-batches in flight, the loss's tensors, the 16-bit weight copies the forward
  saved, gathered weights, and the model states — gradients only where they already exist (gradient
  accumulation, or wrappers that keep them in persistent buffers; ``optimizer.zero_grad()`` sets them to
  None by default since PyTorch 2.0);
* **the first layer recomputed** (``full`` and ``op`` checkpointing): the activations and that layer's whole
  working set, once the loss's tensors are freed (only the logits the loop holds remain);
* **the optimizer step**: weights, gradients, optimizer state and persistent buffers.

On the H200 (``benchmarks/memory_peak.py``, the allocator's history replayed at its peak,
``benchmarks/results/memory-peak_h200x1_2026-12-04.txt``) a 48-layer GPT with full checkpointing peaked in the
loss's forward with 2.9 GiB of cast weights live, a 24-layer one at the start of backward, as these terms put them.

**Model states** (ZeRO, Rajbhandari et al. SC'20): with ``w``, ``g`` bytes per weight and gradient and ``K``
bytes of optimizer state per parameter (:class:`~gpucomm.advisor.precision.Precision`: 4, 4, 8 with fp32
weights; 2, 2, 12 with 16-bit weights and an fp32 master), a GPU holds the parameters of its pipeline stage
split ``tp`` ways, and sharding over the data-parallel group of ``N = dp x cp`` GPUs divides optimizer state
(zero1 and up), gradients (zero2 and up) and weights (zero3, fsdp; hsdp shards over the data-parallel GPUs of
one machine only).  Each pipeline stage holds its own layers (``stages=``), the first the embedding, the last
the final norm and the head (a tied head is a copy there); the most loaded stage is reported.

**Activations** per layer and micro-batch, derived tensor by tensor (:func:`activation_terms`) the way
Korthikanti et al. 2022 ("Reducing Activation Recomputation in Large Transformer Models", Sec. 4.1) derive
their ``34 s b h + 5 a s^2 b`` for GPT — ``s`` tokens per GPU after context parallel, ``b`` micro-batch,
``h`` hidden, ``kv`` the K/V width (``kv_heads x head_dim``), ``f`` the MLP width, ``a`` heads, ``t`` tensor
parallel with sequence parallel (every term divides by t).  In units of ``s b h`` bytes (16-bit tensors):

* both kinds, each tensor kept because a backward formula reads it:
  - the two norms' inputs ``2 + 2``: LayerNorm and RMSNorm backward recompute the normalisation from them
    (``4 + 4`` under autocast over fp32 weights, whose residual stream is fp32);
  - the QKV projection's input ``2``: the weight gradients of ``W_q``, ``W_k``, ``W_v`` are ``input^T dY``;
  - Q ``2`` and K ``2 kv / h``: the gradient of each operand of ``Q K^T`` is the other times the incoming one;
  - V ``2 kv / h``: the gradient of the probabilities in ``A V`` needs V;
  - the attention output ``2``: the output projection's input (its weight gradient), and what flash
    attention keeps (with its logsumexp) to recompute the probabilities in backward;
  - the MLP's input ``2``: the weight gradient of its first matrix (of ``w1`` and ``w3`` for SwiGLU);
* without flash attention, the scores: softmax output ``2 a s / h`` (softmax backward reads it), plus, with
  dropout, its mask ``a s / h`` (1 byte) and output ``2 a s / h`` (the input of ``A V``);
* GPT (``gelu-4h``): GeLU's input ``2 f / h`` (its derivative) and output ``2 f / h`` (the second matrix's
  input); trained with dropout (Megatron's GPT, GPT-3; ``Architecture.dropout``), two masks ``1 + 1`` (after
  attention and after the MLP) — for f = 4h and kv = h exactly Korthikanti's 34 (11 attention + 19 MLP +
  4 norms); nanoGPT-style models without dropout keep 32;
* Llama (``swiglu``, no dropout): the gate ``w1 x`` ``2 f / h`` (SiLU's derivative), SiLU's output and the up
  projection ``w3 x`` ``2 f / h`` each (the product's gradient w.r.t. each factor is the other), the product
  ``2 f / h`` (``w2``'s input): ``2 + 8 f / h``.  For Llama-3-8B (f = 3.5 h, kv = h / 4): 4 + 7 + 30 = 41.
  (torchtitan expands K and V to every head before SDPA, ``repeat_kv``, so without checkpointing it stores
  them at full width, ``+ 3`` for 8B; counted at the GQA width here, as flash attention's native GQA stores.)

**Eager Llama** (``Job.software`` ``eager``: a Llama layer as Meta's reference ``model.py`` and torchtitan write
it, run without fusion) saves things the derivation above does not: RMSNorm's normalised input before it
is scaled by the weight, at the residual stream's width (``_norm(x.float()).type_as(x) * weight``: the
multiply saves it for the weight's gradient; ``r + r``, 4 bytes each under autocast over fp32 weights), and K
and V repeated to every head before SDPA (``repeat_kv``: SDPA saves its inputs at full width,
``4 (1 - kv / h)`` beyond the GQA width); under autocast over fp32 weights, the norm's output once more for each
of ``wk``, ``wv`` and ``w3`` (``2 + 2 + 2``: autocast's cache holds weights, not activations, so each of the
three linears that read a norm's fp32 output casts it to 16 bits and saves its own copy — measured, 16,384 x
896 x 2 B live at each of ``wq``, ``wk``, ``wv`` in every layer of memory-peak's llama-160m).  (The rotary embedding's fp32 complex product saves nothing large:
the frequencies need no gradient, so ``xq * freqs`` keeps only the frequencies.)  Fused stacks (``software``
fused, compiled) fuse these away.

By checkpointing mode:

* ``none``: the terms above.  Flash attention (``kernels=fused``: every run in the published set after 2022
  uses it) never stores the scores, which is exactly what Korthikanti's *selective* recomputation achieves, so
* ``selective`` (Megatron, Korthikanti: recompute the attention core only): the same terms without scores;
* ``op`` (torchtitan's default selective AC for Llama, ``selective_ac_option = "op"``: a checkpoint around
  every block whose policy saves the outputs of ``aten.mm`` and of the SDPA kernels and recomputes everything
  else, except that every second ``mm`` of the block is recomputed too): the block's input ``2``, the outputs
  of the 1st, 3rd, ... matmul of :meth:`~gpucomm.models.Architecture.layer_matmuls` (Llama: ``wq`` ``2``,
  ``wv`` ``2 kv / h``, ``w1`` ``2 f / h``, ``w2`` ``2``), the attention output ``2`` and its fp32 logsumexp
  ``4 a / h``.  Llama-3-8B: 15.53;
* ``full``: only each layer's input, ``2``, plus one layer's full working set while it is recomputed.

The last stage also keeps the final norm's input (residual) and the head's input (16-bit) per micro-batch.

**Micro-batches in flight** per pipeline stage ``r`` (0 = first) of ``L_r`` layers, from the schedules of
Megatron-Core (``megatron/core/pipeline_parallel/schedules.py``): 1F1B runs ``pp - r - 1`` warm-up forwards,
so ``min(m, pp - r)`` micro-batches of ``L_r`` layers are held; the interleaved schedule runs
``2 (pp - r - 1) + (vpp - 1) pp`` warm-up chunk forwards, so ``min(m vpp, 2 (pp - r - 1) + (vpp - 1) pp + 1)``
chunks of ``L_r / vpp`` layers are held — for the first stage ``pp + (pp - 1) / vpp`` micro-batches, Narayanan
et al. SC21's ``(1 + (pp - 1) / (pp vpp))`` factor.  Computed from the real stage sizes.

**Loss** (``Job.loss``), on the last stage, per logit (token x vocabulary entry / t): ``upcast`` = 12 bytes —
``F.cross_entropy`` is ``log_softmax`` then ``nll_loss`` (``cross_entropy_loss`` in
``aten/src/ATen/native/LossNLL.cpp``), both on autocast's fp32 list; ``log_softmax``'s backward reads its
fp32 output (``_log_softmax_backward_data(grad, output, ...)``, ``tools/autograd/derivatives.yaml``), so at
the start of backward the saved fp32 log-softmax, the fp32 gradient ``nll_loss`` passes back and the fp32
gradient of the upcast logits are alive together (3 x 4 bytes; the issue's 2 x 8192 x 128256 x 4 B = 7.8 GiB
each for two 8,192-token Llama-3 samples), and the 16-bit logits themselves, which the loop a user writes holds
(nanoGPT's ``logits, loss = model(X, Y)``; they stay alive through backward and the optimizer step): 14 bytes
with 16-bit compute.  During the loss's forward ``log_softmax`` writes its fp32 output while its fp32 input (the
upcast logits) is alive: 8 bytes beside the logits.  Cross-entropy on 16-bit logits under autocast holds
less: autocast runs ``log_softmax`` with ``dtype=float32`` (its fp32-set-dtype list,
``AT_FORALL_FP32_SET_OPT_DTYPE`` in ``aten/src/ATen/autocast_mode.h``), so no fp32 copy of the logits is made (4
bytes beside them in the forward), and its backward writes the gradient in the input's 16-bit dtype
(``_log_softmax_backward_data``'s ``input_dtype``): 4 + 4 + 2 = 10 bytes at the start of backward, 12 with the
logits the loop holds — as the H200 showed for gpt-774m and an 82 M GPT, one fp32 tensor fewer than the
upcast loss (``benchmarks/results/memory-peak-r3_h200x1_2026-12-04.txt``).  ``fused`` = 4 bytes: the 16-bit logits and their 16-bit gradient.
DataParallel computes the loss on device 0 over the whole gathered batch.

**Autocast copies**: under ``torch.autocast`` over fp32 weights, every matmul casts its weight to 16 bits and
saves the copy for backward (``cached_cast`` in ``aten/src/ATen/autocast_mode.h``; with the cast cache on,
the copies also live until the autocast region is left), 2 bytes per matrix weight of the stage / t.  Full
and per-op checkpointing save none of the layers' copies (recomputed in backward), so they are freed when the
forward leaves autocast; the head's stays.  FSDP's mixed precision
gathers 16-bit weights instead (the gathered buffers below); 16-bit weights need no copies.

**Buffers**: DDP's gradient buckets are a second gradient-sized buffer (``gradient_as_bucket_view=False``,
its default: "the saved memory size will be equal to the total gradients size",
``torch/nn/parallel/distributed.py``), allocated even at world size 1; gpucomm's ``replicated`` makes the
gradients views of its buckets (persistent, no second copy); 16-bit-weight stacks (Megatron, DeepSpeed)
keep gradients in contiguous persistent buffers.  fsdp/hsdp with ``reshard=fwd`` gather two layers' 16-bit
weights (the current one and the prefetched next) and hold one layer's unsharded gradients before the
reduce-scatter; ``reshard=bwd`` keeps every unit's gathered weights from forward to backward; ``reshard=step``
also keeps the unsharded gradients across micro-batches.  DeepSpeed's zero3 caps live parameters at
``stage3_max_live_parameters`` (1e9) and its reduce bucket at 5e8 elements (its defaults); zero1/zero2 keep
two 25 MiB buckets.  DataParallel's device 0 also holds every replica's gathered outputs' loss (above).

**Allocated, reserved, fits.**  ``allocated`` is the sum of the terms above (``torch.cuda.max_memory_allocated``);
``reserved`` adds the caching allocator's margin (block rounding and fragmentation: what
``max_memory_reserved`` shows beyond it), a profile quantity where measured, else
:data:`ALLOCATOR_MARGIN_BYTES` (assumed).  ``fits`` judges ``reserved`` plus :data:`RUNTIME_BYTES` (memory
outside PyTorch's allocator) against the usable capacity the driver reports.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from gpucomm.advisor.job import Job
from gpucomm.advisor.layout import GATHERED, Layout
from gpucomm.models import Architecture

__all__ = ["ALLOCATOR_MARGIN_BYTES", "BUCKET_BYTES", "RUNTIME_BYTES", "MemoryTerms", "activation_bytes_per_layer",
           "activation_terms", "in_flight", "loss_bytes_per_logit", "memory", "model_state_terms", "shard_size",
           "stage_params"]

GiB = 2**30
RUNTIME_BYTES = 1 * GiB
"""Assumed: the CUDA context, cuBLAS/cuDNN workspaces and NCCL's channel buffers, outside PyTorch's caching
allocator (neither allocated nor reserved, but taken from the capacity)."""
ALLOCATOR_MARGIN_BYTES = 2 * GiB
"""Assumed where no measured profile gives it: reserved beyond allocated at the peak (the caching allocator's
block rounding and fragmentation).  Together with :data:`RUNTIME_BYTES` the 3 GiB the planner set aside before
memory was split into allocated and reserved."""
BUCKET_BYTES = 2 * 25 * 2**20
"""Two of the 25 MiB reduce buckets of zero1/zero2 (one filling, one in flight)."""
_ZERO3_LIVE_PARAMS = 1e9
_ZERO3_REDUCE_BUCKET = 5e8
_LOSS_BYTES = {"upcast": 12.0, "autocast": 10.0, "upcast-del": 12.0, "fused": 4.0}
"""Bytes per logit the loss's own tensors hold at the start of backward (module docstring, **Loss**)."""
_LOSS_FWD_BYTES = {"upcast": 8.0, "autocast": 4.0, "upcast-del": 8.0, "fused": 0.0}
"""Bytes per logit the loss's own tensors hold while its forward runs, beyond the logits (module docstring,
**Loss**): the fp32 logits ``log_softmax`` reads (``upcast``: the loop's own ``.float()``) and the fp32 output
it writes."""


def loss_bytes_per_logit(loss: str, compute_bytes: float, at: str = "backward") -> float:
    """Bytes per logit the logits and the loss hold ``at`` one moment of the step (module docstring, **Loss**):
    ``backward`` (its start): the loss's tensors, and for ``upcast`` and ``autocast`` the 16-bit logits the
    training loop holds (``logits = model(x)``, alive until the step ends; ``upcast-del``'s loop deletes them
    before backward, torchtitan; ``fused``'s 4 include them); ``forward`` (the loss's forward): the logits and
    the fp32 input and output of ``log_softmax``; ``recompute`` (a checkpointed layer rerun later in backward,
    the loss's tensors freed): the logits the loop still holds."""
    held = compute_bytes if loss in ("upcast", "autocast") else 0.0
    if at == "forward":
        return _LOSS_FWD_BYTES[loss] + compute_bytes
    if at == "recompute":
        return held
    return _LOSS_BYTES[loss] + held
_TERMS = ("params", "grads", "optimizer", "activations", "loss", "autocast", "buffers")


@dataclass(frozen=True, kw_only=True, slots=True)
class MemoryTerms:
    """Bytes on the most loaded GPU at its peak, by term (module docstring)."""

    params: float
    grads: float
    optimizer: float
    activations: float
    loss: float
    """The logits and the loss's tensors (``Job.loss``)."""
    autocast: float
    """16-bit copies of fp32 weights autocast holds at that moment: its cast cache during the forward, the
    copies the graph saved for backward after it."""
    buffers: float
    margin: float
    """Reserved beyond allocated (the caching allocator's)."""
    runtime: float
    """Outside PyTorch's allocator (CUDA context, NCCL)."""
    stage: int = 0
    """The pipeline stage these terms are of (0 = first)."""

    @property
    def allocated(self) -> float:
        return sum(getattr(self, k) for k in _TERMS)

    @property
    def reserved(self) -> float:
        return self.allocated + self.margin

    @property
    def total(self) -> float:
        """What must fit in the usable capacity: reserved plus the runtime's own memory."""
        return self.reserved + self.runtime

    def as_dict(self) -> dict[str, float]:
        return {k: getattr(self, k) for k in (*_TERMS, "margin", "runtime")}


def activation_terms(arch: Architecture, ac: str, flash: bool = True, s: float = 0.0,
                     residual_bytes: float = 2.0, eager: bool = False, autocast: bool = False) -> dict[str, float]:
    """One layer's stored activations of ``arch``, tensor by tensor, in bytes per ``s b h`` (module doc).

    ``s`` (tokens of one sequence on this GPU) matters only for the score terms, when ``flash`` is False.
    ``residual_bytes``: bytes per element of the residual stream, which the norms save as their input and
    full or per-op checkpointing keeps as the layer's input: 2 with 16-bit weights, 4 under autocast over
    fp32 weights (the embedding and the residual adds stay fp32; ``layer_norm`` and ``rms_norm`` are on
    autocast's fp32 list, ``aten/src/ATen/autocast_mode.h``).  Other tensors are 16-bit: multiply by 2 for
    fp32 compute (:func:`layer_bytes`).  ``eager``: a Llama layer written as Meta's reference ``model.py`` runs
    in eager PyTorch (module docstring, **Eager Llama**), which saves more than the derivation above; with
    ``autocast`` (over fp32 weights) also the norm outputs autocast casts again for each matmul that reads them.
    """
    h, a = arch.hidden, arch.heads
    kv_h, f_h = arch.kv_dim / h, arch.ffn_hidden / h
    swiglu = arch.ffn_kind == "swiglu"
    r = residual_bytes
    if ac == "full":
        return {"layer input": r}
    if ac == "op":
        terms = {"block input": r}
        terms.update({f"{name} output (kept mm)": 2.0 * out / h
                      for i, (name, _, out) in enumerate(arch.layer_matmuls()) if i % 2 == 0})
        terms["attention output (kept SDPA)"] = 2.0
        terms["attention logsumexp (fp32)"] = 4.0 * a / h
        return terms
    terms = {"norm inputs": 2.0 * r, "QKV input": 2.0, "Q": 2.0, "K": 2.0 * kv_h, "V": 2.0 * kv_h,
             "attention output": 2.0, "MLP input": 2.0}
    if swiglu:
        terms.update({"gate (SiLU input)": 2.0 * f_h, "SiLU output": 2.0 * f_h, "up (w3 output)": 2.0 * f_h,
                      "gate x up (w2 input)": 2.0 * f_h})
        if eager:
            terms["norm outputs before the weight"] = 2.0 * r
            terms["K and V repeated to every head (repeat_kv)"] = 4.0 * (1.0 - kv_h)
            if autocast:
                terms["norm outputs cast again for wk, wv and w3 (autocast caches weights only)"] = 6.0
    else:
        terms.update({"GeLU input": 2.0 * f_h, "GeLU output": 2.0 * f_h})
    if arch.dropout:
        terms["dropout masks"] = 2.0
    if ac == "none" and not flash:
        terms["scores (softmax output)"] = 2.0 * a * s / h
        if arch.dropout:
            terms["scores dropout mask and output"] = 3.0 * a * s / h
    return terms




@functools.lru_cache(maxsize=4096)
def layer_bytes(arch: Architecture, ac: str, *, flash: bool, s: float, autocast: bool, compute_bytes: int,
                eager: bool = False) -> float:
    """One layer's stored activations in bytes per ``s b h`` for the job's numerics (:func:`activation_terms`):
    16-bit terms as derived, doubled for fp32 compute (dropout masks stay 1 byte); the residual stream fp32
    under autocast."""
    terms = activation_terms(arch, ac, flash, s, residual_bytes=4.0 if autocast or compute_bytes == 4 else 2.0,
                             eager=eager, autocast=autocast)
    scale = compute_bytes / 2
    return sum(v if k in ("dropout masks", "layer input", "block input", "norm inputs", "norm outputs before the "
                          "weight") or "fp32" in k
               else v * scale for k, v in terms.items())


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


@functools.lru_cache(maxsize=1024)
def _sizes(arch: Architecture) -> tuple[float, float, float, float, float, float]:
    """(params, matmul params, one layer's params, one layer's matmul params, embedding, norm + head) of ``arch``."""
    vh = arch.vocab * arch.hidden
    return (float(arch.params()), float(arch.matmul_params()), float(arch.layer_params()),
            (arch.matmul_params() - vh) / arch.layers, float(arch.embedding_params()),
            float(arch.norm_params() + (arch.head_params() or vh)))  # a tied head is a copy on the last stage


def stage_params(arch: Architecture, layout: Layout, stage: int) -> tuple[float, float]:
    """(parameters, matrix-multiply parameters) of pipeline stage ``stage`` (0 = first), before the tp split."""
    params, matmul, layer, layer_mm, embedding, head = _sizes(arch)
    if layout.pp == 1:
        return params, matmul
    stages = layout.stage_layers(arch.layers)
    n = stages[stage]
    p, mm = n * layer, n * layer_mm
    if stage == 0:
        p += embedding
    if stage == len(stages) - 1:
        p += head
        mm += arch.vocab * arch.hidden
    return p, mm


def in_flight(layout: Layout, stage: int, layers: int, micro_batches: int) -> float:
    """Layer-micro-batches of activations stage ``stage`` (``layers`` layers) holds (module docstring)."""
    pp, vpp = layout.pp, layout.vpp
    if vpp == 1:
        return layers * min(micro_batches, pp - stage)
    chunks = min(micro_batches * vpp, 2 * (pp - stage - 1) + (vpp - 1) * pp + 1)
    return chunks * layers / vpp


_FIELDS = ("params", "grads", "optimizer", "activations", "loss", "autocast", "buffers")


def _device(replica: tuple[float, ...], wrap: str, colocated: float) -> tuple[float, ...]:
    """One device's terms (in :data:`_FIELDS` order) from one replica's, when ``colocated`` replicas share it.
    DataParallel's replicas share device 0's model states and loss (computed once on the gathered outputs) but
    each holds a copy of the weights and its own activations and casts; other wrappers' replicas hold
    everything of their own."""
    if colocated == 1:
        return replica
    if wrap != "dataparallel":
        return tuple(colocated * v for v in replica)
    w, g, opt, acts, loss, cast, buf = replica
    return (w * colocated, g, opt, acts * colocated, loss, cast * colocated, buf)


def memory(job: Job, layout: Layout, margin_bytes: float | None = None) -> MemoryTerms:
    """The memory terms of ``layout`` on its most loaded GPU (module docstring).

    ``margin_bytes``: the allocator's reserved-beyond-allocated margin, measured; None: the assumed default.
    """
    arch, L, prec = job.arch, layout, job.precision
    flash = job.kernels == "fused"
    tp, wrap, c = L.tp, L.wrap, prec.compute_bytes
    gathered = L.shard in GATHERED
    # FSDP's mixed precision computes on gathered 16-bit weights: no autocast, a 16-bit residual stream
    cast = prec.autocast and not gathered
    n = shard_size(L, job.gpus_per_node)
    zero = {"none": 0, "zero1": 1, "zero2": 2}.get(L.shard, 3)
    m = job.global_batch // (L.dp * L.mb)
    s = job.seq / L.cp
    sbh = s * L.mb * arch.hidden / tp
    eager = job.software == "eager"
    per_layer = layer_bytes(arch, L.ac, flash=flash, s=s, autocast=cast, compute_bytes=c, eager=eager) * sbh
    working = layer_bytes(arch, "none", flash=flash, s=s, autocast=cast, compute_bytes=c, eager=eager) * sbh
    # persistent gradient buffers: replicated's bucket views, the 16-bit-weight stacks' contiguous buffers
    persistent = wrap == "replicated" or prec.weights != "fp32"
    regather = L.regather
    unit = _sizes(arch)[2] / tp
    stages = L.stage_layers(arch.layers)
    last_r = len(stages) - 1
    # the heaviest stage is the first, the last, or the first stage of each layer count (it holds the most
    # micro-batches of that size): no need to visit all pp of them
    visit = {0, last_r}
    seen: set[int] = set()
    for r, k in enumerate(stages):
        if k not in seen:
            seen.add(k)
            visit.add(r)
    best, best_sum, best_r = (), -1.0, 0
    for r in sorted(visit):
        (p_all, mm_all), layers = stage_params(arch, L, r), stages[r]
        last = r == last_r
        p, mm = p_all / tp, mm_all / tp
        w, g, opt = model_state_terms(zero, p, n, weight_bytes=prec.weight_bytes, grad_bytes=prec.grad_bytes,
                                      optimizer_bytes=prec.optimizer_bytes)
        acts = in_flight(L, r, layers, m) * per_layer
        logits = 0.0
        if last:
            acts += (4.0 if cast else c) * sbh + c * sbh  # final norm input, head input
            logits = s * (job.global_batch if wrap == "dataparallel" else L.mb) * arch.vocab / tp
        # the layer being recomputed in backward holds its full working set, after the loss's tensors are freed
        working_r = working if L.ac in ("full", "op") and layers else 0.0
        # autocast's cast cache holds every matmul weight's 16-bit copy until the forward leaves autocast; in
        # backward only the copies the graph saved: all of them without checkpointing, the head's with it
        cast_fwd = 2.0 * mm if cast else 0.0
        head_cast = 2.0 * arch.vocab * arch.hidden / tp if cast and last else 0.0
        cast_bwd = head_cast if L.ac in ("full", "op") else cast_fwd
        grads_a = g if (m > 1 or persistent) else 0.0
        buffers = 0.0
        if gathered:
            buffers = (2 * c + prec.grad_bytes) * unit
            if L.shard == "zero3":
                buffers = min(buffers, c * _ZERO3_LIVE_PARAMS + prec.grad_bytes * _ZERO3_REDUCE_BUCKET)
            if regather in ("bwd", "step"):
                buffers += c * p
            if regather == "step":
                buffers += prec.grad_bytes * p
        elif L.shard in ("zero1", "zero2"):
            buffers = min(BUCKET_BYTES, g)
        elif wrap == "ddp" and not persistent:
            buffers = prec.grad_bytes * p  # DDP's buckets: a second copy of the gradients
        phases = [(w, grads_a, opt, acts, loss_bytes_per_logit(job.loss, c, "forward") * logits, cast_fwd,
                   buffers),  # the loss's forward
                  (w, grads_a, opt, acts, loss_bytes_per_logit(job.loss, c) * logits, cast_bwd,
                   buffers),  # the start of backward
                  (w, g, opt, 0.0, 0.0, 0.0, 0.0 if gathered else buffers)]  # the optimizer step
        if working_r:  # the first layer recomputed
            phases.append((w, grads_a, opt, acts + working_r, loss_bytes_per_logit(job.loss, c, "recompute")
                           * logits, cast_bwd, buffers))
        for phase in phases:
            terms = _device(phase, wrap, job.colocated)
            total = sum(terms)
            if total > best_sum:
                best, best_sum, best_r = terms, total, r
    margin = ALLOCATOR_MARGIN_BYTES if margin_bytes is None else margin_bytes
    runtime = float(RUNTIME_BYTES)
    if job.profile.memory_bytes is None:  # CPU: no device capacity, no CUDA context
        margin = runtime = 0.0
    return MemoryTerms(**dict(zip(_FIELDS, best, strict=True)), margin=margin, runtime=runtime, stage=best_r)
