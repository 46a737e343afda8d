"""The shapes a compute profile measures: one GPU's share of a transformer layer, attention, embedding, head and
loss, optimizer step and whole small steps — and the grids of them that ``gpucomm measure`` covers.

A layer shape is what *one GPU of a layout* runs (Megatron's tensor parallel with sequence parallel left out):
input width ``hidden``; the QKV projection's output ``(heads + 2 kv_heads) x head_dim / tp``; attention over
``heads / tp`` query heads (``kv_heads / tp`` key/value heads, at least one) at ``seq / cp`` tokens; the MLP at
``ffn / tp``; ``mb`` sequences.  The two families are the models users write:

* ``gpt`` (GPT-2, nanoGPT): LayerNorm with biases, biased linears, fused QKV, GeLU MLP of ``ffn`` (4h), learned
  positions in the embedding, the head tied to the embedding;
* ``llama`` (Llama 2/3, torchtitan): RMSNorm, no biases, separate ``wq``/``wk``/``wv``, rotary embeddings, K and V
  repeated to every query head (``repeat_kv``) before SDPA, SwiGLU MLP of ``ffn``, untied head.

The default grid spans the shapes a search visits — hidden 768-24576 with tp 1-8, 1,024-65,536 tokens per
micro-batch, head dims 64 and 128, sequences 512-8,192, both families with grouped-query attention — within a
wall-time budget on an H200 (:func:`estimate_s`).  ``--quick`` is a small grid for a first look; ``--model``
measures the shapes of one model (its hidden, heads, FFN, vocabulary) at every tp dividing its heads up to 8.
Nothing here imports torch.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from gpucomm.models import Architecture

__all__ = ["AC_MODES", "FAMILIES", "LOSSES", "AttentionShape", "EmbeddingShape", "Grid", "HeadShape", "LayerShape",
           "OptimizerShape", "Rates", "SETTLE_S", "STEP_ROUNDS", "StepShape", "default_grid", "estimate_s",
           "expected_s", "family_of", "layer_mm_params", "model_grid", "quick_grid", "repeats", "tiny_grid", "work"]

FAMILIES = ("gpt", "llama")
AC_MODES = ("none", "selective", "op", "full")
"""Activation checkpointing as :mod:`gpucomm.advisor.memory` defines it."""
LOSSES = ("upcast", "autocast")
"""How the head's loss is written: ``F.cross_entropy(logits.float(), y)`` (``upcast``), or on the bf16 logits
under autocast, which runs the log-softmax in fp32 itself (``autocast``)."""


def family_of(arch: Architecture) -> str:
    """The measured family an architecture's layer is priced as (its MLP kind decides)."""
    return "llama" if arch.ffn_kind == "swiglu" else "gpt"


def _local(n: int, tp: int) -> int:
    return max(1, n // tp)


@dataclass(frozen=True, kw_only=True, slots=True)
class LayerShape:
    """One transformer layer as one GPU of a layout runs it (module docstring)."""

    family: str
    hidden: int
    heads: int
    kv_heads: int
    ffn: int
    tp: int = 1
    seq: int
    """Tokens of one sequence on this GPU (after context parallel)."""
    mb: int = 1
    ac: str = "none"

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    @property
    def tokens(self) -> int:
        return self.seq * self.mb

    @property
    def local_heads(self) -> int:
        return _local(self.heads, self.tp)

    @property
    def local_kv_heads(self) -> int:
        return _local(self.kv_heads, self.tp)

    def matmuls(self) -> list[tuple[str, int, int]]:
        """The layer's weight matmuls on this GPU, ``(name, in, out)``, in forward order."""
        h, d, f = self.hidden, self.head_dim, _local(self.ffn, self.tp)
        q, kv = self.local_heads * d, self.local_kv_heads * d
        if self.family == "llama":
            return [("wq", h, q), ("wk", h, kv), ("wv", h, kv), ("wo", q, h), ("w1", h, f), ("w3", h, f),
                    ("w2", f, h)]
        return [("qkv", h, q + 2 * kv), ("proj", q, h), ("fc", h, f), ("fc2", f, h)]

    def mm_params(self) -> int:
        return sum(i * o for _, i, o in self.matmuls())

    def gemm_flops(self) -> float:
        """Forward + backward matmul FLOPs of the weights (``6 x tokens x weights``), no recomputation."""
        return 6.0 * self.tokens * self.mm_params()

    def attention(self) -> AttentionShape:
        return AttentionShape(head_dim=self.head_dim, heads=self.local_heads, seq=self.seq, mb=self.mb)

    def recomputed_mm_share(self) -> float:
        """The share of the layer's forward matmul FLOPs its checkpointing mode runs again in the backward.

        ``torch.utils.checkpoint`` (non-reentrant, early stop on: PyTorch's default) reruns the forward only
        until the last tensor the backward needs is back; autograd saves an op's inputs *before* it runs, so the
        layer's last matmul (nanoGPT's ``c_proj`` of the MLP, Llama's ``w2``) never runs again.  ``full`` reruns
        every other matmul; ``op`` (torchtitan's policy) the odd ones it does not save (GPT's attention
        projection; Llama's ``wk``, ``wo``, ``w3``) but the last; ``selective`` none (it reruns attention alone).
        """
        mm = self.matmuls()
        last = len(mm) - 1
        if self.ac == "full":
            ks = range(last)
        elif self.ac == "op":
            ks = [k for k in range(last) if k % 2]
        else:
            return 0.0
        return sum(mm[k][1] * mm[k][2] for k in ks) / self.mm_params()

    def recomputes_elementwise(self) -> bool:
        """``full`` and ``op`` rerun the layer's norms, activations and casts; ``selective`` does not."""
        return self.ac in ("full", "op")

    def recomputes_attention(self) -> bool:
        """``full`` and ``selective`` rerun attention's forward; ``op`` saves SDPA's outputs."""
        return self.ac in ("full", "selective")

    def recompute_flops(self) -> float:
        """The FLOPs the checkpointing mode runs again (:meth:`recomputed_mm_share`, attention)."""
        return (2.0 * self.tokens * self.mm_params() * self.recomputed_mm_share()
                + (self.attention().fwd_flops() if self.recomputes_attention() else 0.0))

    def key(self) -> dict:
        return asdict(self)


def layer_mm_params(arch: Architecture, tp: int) -> int:
    """One layer's matmul weights on one GPU of ``tp`` (as :meth:`LayerShape.matmuls` counts them)."""
    return LayerShape(family=family_of(arch), hidden=arch.hidden, heads=arch.heads, kv_heads=arch.kv_heads,
                      ffn=arch.ffn_hidden, tp=tp, seq=1).mm_params()


@dataclass(frozen=True, kw_only=True, slots=True)
class AttentionShape:
    """Causal SDPA on one GPU: ``mb x heads`` (K and V already repeated to every query head)."""

    head_dim: int
    heads: int
    seq: int
    mb: int = 1

    @property
    def rows(self) -> int:
        """Independent attention problems (``mb x heads``)."""
        return self.mb * self.heads

    def fwd_flops(self) -> float:
        """Causal ``Q K^T`` and ``A V``: ``2 x 2 x s^2 / 2 x d`` per row."""
        return 2.0 * self.rows * self.seq * self.seq * self.head_dim

    def flops(self) -> float:
        """Forward and backward (backward: 2.5 x forward, five matmuls against two)."""
        return 3.5 * self.fwd_flops()

    def key(self) -> dict:
        return asdict(self)


@dataclass(frozen=True, kw_only=True, slots=True)
class EmbeddingShape:
    """Token embedding (``vocab / tp`` rows, vocabulary-parallel), plus learned positions for GPT."""

    vocab: int
    hidden: int
    seq: int
    mb: int = 1
    positions: bool = False

    @property
    def tokens(self) -> int:
        return self.seq * self.mb

    def nbytes(self) -> float:
        """The normaliser: the fp32 gradient of the table written (zeroed and scattered into) and read by the
        optimizer's neighbours, ``8 V h``, plus ``8`` bytes per token and width moved forward and backward."""
        return 8.0 * self.vocab * self.hidden + 8.0 * self.tokens * self.hidden

    def key(self) -> dict:
        return asdict(self)


@dataclass(frozen=True, kw_only=True, slots=True)
class HeadShape:
    """Final norm, output projection to ``vocab / tp`` and the loss, written as :data:`LOSSES` says."""

    family: str
    vocab: int
    hidden: int
    seq: int
    mb: int = 1
    loss: str = "upcast"

    @property
    def tokens(self) -> int:
        return self.seq * self.mb

    def flops(self) -> float:
        return 6.0 * self.tokens * self.hidden * self.vocab

    def key(self) -> dict:
        return asdict(self)


@dataclass(frozen=True, kw_only=True, slots=True)
class OptimizerShape:
    """Fused AdamW over ``layers`` blocks of a ``width``-wide model's tensors (about ``12 width^2`` each)."""

    width: int
    layers: int

    def tensors(self) -> list[tuple[int, ...]]:
        w = self.width
        per = [(3 * w, w), (w, w), (4 * w, w), (w, 4 * w), (w,), (w,), (3 * w,), (4 * w,)]
        return per * self.layers

    def params(self) -> int:
        total = 0
        for shape in self.tensors():
            n = 1
            for s in shape:
                n *= s
            total += n
        return total

    def key(self) -> dict:
        return asdict(self)


@dataclass(frozen=True, kw_only=True, slots=True)
class StepShape:
    """A whole small training step: embedding, ``layers`` layers, head and loss, fused AdamW — the loop a user
    writes, timed and its peak allocated and reserved memory read (the allocator's margin)."""

    layer: LayerShape
    vocab: int
    layers: int = 2
    loss: str = "upcast"

    def key(self) -> dict:
        return {"layer": self.layer.key(), "vocab": self.vocab, "layers": self.layers, "loss": self.loss}


HOST_STEP_LAYERS = (2, 8)
"""Layer counts of the whole ``op`` steps whose difference gives a layer's host time inside a step."""
MARGIN_STEP_LAYERS = (8, 24)
"""Layer counts, beyond 2, of whole ``none`` and ``full`` steps at three widths a family: a layer's marginal time
inside a step (:meth:`gpucomm.advisor.compute.profile._Tables.in_step`), and the caching allocator's margin by
layers (read, not modelled: benchmarks/results/margin-layers_h200x1_2026-12-04.txt and the profile's own steps
show it growing at some shapes and shrinking at others)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Grid:
    """Everything one ``gpucomm measure`` run times."""

    layers: tuple[LayerShape, ...]
    attention: tuple[AttentionShape, ...]
    embeddings: tuple[EmbeddingShape, ...]
    heads: tuple[HeadShape, ...]
    optimizers: tuple[OptimizerShape, ...]
    steps: tuple[StepShape, ...]

    def count(self) -> int:
        return (len(self.layers) + len(self.attention) + len(self.embeddings) + len(self.heads)
                + len(self.optimizers) + len(self.steps))


_VOCAB = {"gpt": 50304, "llama": 128256}
"""GPT-2's vocabulary padded to a multiple of 64 (nanoGPT) and Llama 3's."""


def _layer(family: str, hidden: int, tp: int, tokens: int, ac: str = "none", head_dim: int | None = None,
           seq: int | None = None) -> LayerShape:
    d = head_dim or (64 if hidden < 2048 else 128)
    heads = hidden // d
    if family == "gpt":
        kv, ffn = heads, 4 * hidden
    else:  # Llama 3's ratios: GQA with a quarter of the heads (at least one), FFN 3.5 h rounded to 256
        kv, ffn = max(1, heads // 4), 256 * round(3.5 * hidden / 256)
    s = seq or min(tokens, 4096)
    return LayerShape(family=family, hidden=hidden, heads=heads, kv_heads=kv, ffn=ffn, tp=tp, seq=s,
                      mb=max(1, tokens // s), ac=ac)


_WIDTHS = {  # (family, tp) -> hidden sizes measured
    ("gpt", 1): (768, 1152, 1536, 2304, 3072, 4608, 6144), ("gpt", 2): (3072, 6144), ("gpt", 4): (6144, 12288),
    ("gpt", 8): (6144, 12288, 24576),
    ("llama", 1): (768, 1024, 1536, 2048, 3072, 4096, 6144, 8192), ("llama", 2): (4096, 8192),
    ("llama", 4): (8192, 16384),
    ("llama", 8): (4096, 8192, 16384),
}
_TOKENS = {1: (1024, 2048, 4096, 8192, 16384, 32768, 65536)}
"""Tokens per micro-batch measured, by tp (tp > 1: :data:`_TOKENS_TP`)."""
_TOKENS_TP = (1024, 4096, 16384, 65536)
_MAX_LAYER_FLOPS = 1.2e14
"""Per-iteration cap of the default grid (about 0.2 s on an H200): larger points are left to extrapolation."""


def default_grid() -> Grid:
    """The grid the shipped profile is measured on (module docstring)."""
    layers: list[LayerShape] = []
    for (family, tp), widths in _WIDTHS.items():
        for h in widths:
            for t in _TOKENS.get(tp, _TOKENS_TP):
                shape = _layer(family, h, tp, t)
                if shape.gemm_flops() <= _MAX_LAYER_FLOPS:
                    layers.append(shape)
            mid = [t for t in (4096, 16384) if _layer(family, h, tp, t).gemm_flops() <= _MAX_LAYER_FLOPS / 2]
            for t in mid if tp == 1 else mid[-1:]:
                layers += [_layer(family, h, tp, t, ac=ac) for ac in AC_MODES[1:]]
    attention = tuple(AttentionShape(head_dim=d, heads=rows, seq=s, mb=1)
                      for d in (64, 128) for s in (512, 1024, 2048, 4096, 8192) for rows in (8, 32, 128, 512))
    vocabs = (("gpt", 50304), ("llama", 128256), ("llama", 32000))
    embeddings = tuple(EmbeddingShape(vocab=v // tp, hidden=h, seq=min(t, 4096), mb=max(1, t // 4096),
                                      positions=fam == "gpt")
                       for fam, v in vocabs for tp in (1, 8) if v > 32000 or tp == 1
                       for h in (_WIDTHS[(fam, tp)][0], _WIDTHS[(fam, tp)][-1]) for t in (1024, 8192, 65536))
    heads = []
    for fam, v in vocabs:
        for tp in (1, 8):
            widths = _WIDTHS[(fam, tp)]
            if tp == 8:
                widths = (widths[0], widths[-1]) if v > 32000 else ()
            elif v == 32000:
                widths = (768, 1536, 3072, 6144)
            for h in widths:
                for t in (1024, 4096, 16384, 65536):
                    if t * v // tp * 14 > 48e9 or 6.0 * t * h * v / tp > 2.4e14:
                        continue  # logits, fp32 copy, log-softmax and gradient; or over 0.4 s
                    heads += [HeadShape(family=fam, vocab=v // tp, hidden=h, seq=min(t, 4096),
                                        mb=max(1, t // 4096), loss=loss) for loss in LOSSES]
    optimizers = (OptimizerShape(width=256, layers=2), OptimizerShape(width=1024, layers=8),
                  OptimizerShape(width=2048, layers=24), OptimizerShape(width=4096, layers=24),
                  OptimizerShape(width=8192, layers=6))
    steps = tuple(StepShape(layer=_layer(fam, h, 1, t, ac=ac), vocab=_VOCAB[fam])
                  for fam in FAMILIES for h in _WIDTHS[(fam, 1)][0:6:2] for t in (4096, 16384)
                  for ac in (("none", "full") if t == 16384 else ("none",)))
    # per-op checkpointing at its two narrowest widths, 2 and 8 layers: a layer's host time inside whole steps
    # (the marginal time of a layer; isolated op layers overstate it, advisor-single-gpu-r2_h200x1_2026-12-04)
    steps += tuple(StepShape(layer=_layer(fam, h, 1, 4096, ac="op"), vocab=_VOCAB[fam], layers=n)
                   for fam in FAMILIES for h in _WIDTHS[(fam, 1)][0:2] for n in HOST_STEP_LAYERS)
    # whole steps at more layers, next to the 2-layer steps above (MARGIN_STEP_LAYERS); at 4,096 tokens 8 layers
    # without checkpointing and 2 and 8 with full checkpointing, so that a layer's time inside a step is measured
    # at a micro-batch's smallest token count too, where launch gaps and the host weigh most (on a slow host a
    # full-checkpointing step of gpt-650m at 8,192 tokens ran 124.5 ms against 104-107 ms on three others,
    # advisor-single-gpu-r15_h200x1_2026-12-04: the host's time of the mode, which device-bound steps hide)
    steps += tuple(StepShape(layer=_layer(fam, h, 1, 16384, ac=ac), vocab=_VOCAB[fam], layers=n)
                   for fam in FAMILIES for h in _WIDTHS[(fam, 1)][0:6:2] for ac in ("none", "full")
                   for n in MARGIN_STEP_LAYERS)
    steps += tuple(StepShape(layer=_layer(fam, h, 1, 4096, ac=ac), vocab=_VOCAB[fam], layers=n)
                   for fam in FAMILIES for h in _WIDTHS[(fam, 1)][0:6:2]
                   for ac, n in (("none", MARGIN_STEP_LAYERS[0]), *(("full", n) for n in HOST_STEP_LAYERS)))
    return Grid(layers=tuple(layers), attention=attention, embeddings=embeddings, heads=tuple(heads),
                optimizers=optimizers, steps=steps)


def quick_grid() -> Grid:
    """A first look (``--quick``): tp 1, two widths per family, two token counts, every part once."""
    layers = [_layer(fam, h, 1, t, ac=ac) for fam, hs in (("gpt", (768, 3072)), ("llama", (2048, 4096)))
              for h in hs for t in (4096, 16384) for ac in (AC_MODES if t == 4096 else ("none",))]
    attention = tuple(AttentionShape(head_dim=d, heads=rows, seq=s)
                      for d in (64, 128) for s in (1024, 4096) for rows in (16, 128))
    embeddings = tuple(EmbeddingShape(vocab=v, hidden=h, seq=4096, mb=m, positions=fam == "gpt")
                       for fam, v in _VOCAB.items() for h in (768, 4096) for m in (1, 4))
    heads = tuple(HeadShape(family=fam, vocab=v, hidden=h, seq=4096, mb=m, loss=loss)
                  for fam, v in _VOCAB.items() for h in (768, 4096) for m in (1, 4) for loss in LOSSES)
    optimizers = (OptimizerShape(width=256, layers=2), OptimizerShape(width=2048, layers=8))
    steps = tuple(StepShape(layer=_layer(fam, h, 1, 4096), vocab=_VOCAB[fam])
                  for fam, h in (("gpt", 768), ("llama", 2048)))
    return Grid(layers=tuple(layers), attention=attention, embeddings=embeddings, heads=heads,
                optimizers=optimizers, steps=steps)


def tiny_grid() -> Grid:
    """A grid a CPU measures in seconds: every kind of point, at toy widths (the command's CPU profile)."""
    layers = []
    for fam in FAMILIES:
        kw = dict(family=fam, heads=2, kv_heads=1 if fam == "llama" else 2)
        layers += [LayerShape(hidden=32, ffn=64, seq=16, mb=1, ac=ac, **kw) for ac in AC_MODES]
        layers += [LayerShape(hidden=32, ffn=64, seq=32, mb=2, **kw), LayerShape(hidden=64, ffn=128, seq=16, **kw)]
    attention = tuple(AttentionShape(head_dim=16, heads=r, seq=s) for s in (16, 32) for r in (2, 8))
    embeddings = tuple(EmbeddingShape(vocab=128, hidden=h, seq=16, mb=m) for h in (32, 64) for m in (1, 4))
    heads = tuple(HeadShape(family="gpt", vocab=128, hidden=h, seq=16, mb=m, loss=loss)
                  for h in (32, 64) for m in (1, 4) for loss in LOSSES)
    optimizers = (OptimizerShape(width=16, layers=1), OptimizerShape(width=32, layers=2))
    steps = tuple(StepShape(layer=la, vocab=128) for la in layers if la.ac == "none" and la.mb == 2)
    return Grid(layers=tuple(layers), attention=attention, embeddings=embeddings, heads=heads,
                optimizers=optimizers, steps=steps)


def model_grid(arch: Architecture, seqs: tuple[int, ...] = (), max_mb: int = 16) -> Grid:
    """The shapes of one model (``--model``/``--arch``): its layer at every tp dividing its heads up to 8, at
    its sequence length and below, micro-batches 1 to ``max_mb`` (powers of four), every checkpointing mode."""
    fam = family_of(arch)
    seqs = seqs or (arch.seq,)
    tps = [t for t in (1, 2, 4, 8) if arch.heads % t == 0]
    layers, attention, embeddings, heads = [], set(), [], []
    mbs = [m for m in (1, 4, 16) if m <= max_mb]
    for tp in tps:
        for s in seqs:
            for m in mbs:
                for ac in AC_MODES:
                    la = LayerShape(family=fam, hidden=arch.hidden, heads=arch.heads, kv_heads=arch.kv_heads,
                                    ffn=arch.ffn_hidden, tp=tp, seq=s, mb=m, ac=ac)
                    if la.gemm_flops() > 4 * _MAX_LAYER_FLOPS:
                        continue
                    layers.append(la)
                    attention.add(la.attention())
                v = arch.vocab // tp
                embeddings.append(EmbeddingShape(vocab=v, hidden=arch.hidden, seq=s, mb=m,
                                                 positions=arch.learned_positions))
                if s * m * v * 14 <= 48e9:
                    heads += [HeadShape(family=fam, vocab=v, hidden=arch.hidden, seq=s, mb=m, loss=loss)
                              for loss in LOSSES]
    width = max(64, arch.hidden)
    optimizers = (OptimizerShape(width=width, layers=1), OptimizerShape(width=width, layers=min(arch.layers, 8)))
    steps = tuple(StepShape(layer=la, vocab=arch.vocab) for la in layers
                  if la.tp == 1 and la.ac in ("none", "full") and la.seq == seqs[0] and la.mb <= 4)
    return Grid(layers=tuple(layers), attention=tuple(sorted(attention, key=lambda a: (a.head_dim, a.seq, a.rows))),
                embeddings=tuple(embeddings), heads=tuple(heads), optimizers=optimizers, steps=steps)


WARMUP, REPEATS = 2, 5
"""Untimed and timed iterations of a point; a point whose iteration is expected to take longer than
:data:`LONG_S` runs 1 and 3 (its median is as stable: fewer launches, longer kernels)."""
LONG_S = 0.05


STEP_ROUNDS = 5
"""Rounds every whole step is timed in, interleaved (``gpucomm measure``'s step rounds,
:func:`gpucomm.advisor.compute.measure.retime_steps`), the median of each kept (as
:data:`gpucomm.advisor.compute.measure.HOST_REPEATS` for the probe).  The rounds after the first are not yet
timed on a GPU: the r28 H200 measurement's main pass timed the default grid's steps once in 73 s (points
243-311 at 129-202 s, benchmarks/results/advisor-profile-r28_h200x1_2026-12-05/measure/measure.log), so five
rounds may not fit one 10-minute device call beside the other points — both stop at whole rounds."""

SETTLE_S = {"layer": 0.4, "head": 0.4, "step": 0.4, "kernels": 0.2, "attention": 0.2, "embedding": 0.1,
            "optimizer": 0.1}
"""Seconds a point's work runs back to back on a GPU, after its warm-up and before its timed window, so that the
window sees the clock the power limit sustains under that work, as a training step does.

Measured (``benchmarks/results/sustained-clock_h200x1_2026-12-04.txt``, ``benchmarks/sustained_clock.py``): on
the H200 a layer's forward + backward timed in a few iterations after an idle second ran at 1,980 MHz and 3-11%
faster than the same work settled at the 700 W limit (1,650-1,890 MHz) for gpt-774m, gpt-2.7b, llama-2.9b and
gpt-150m-8k layer shapes; a small one (llama-160m) ran 6% *slower* in the short window (the clock still rising
from idle).  Most of the settling happens in the first 0.2-0.5 s (the medians by window in that file), so the
layers, heads and whole steps that set a step's device time run 0.4 s first; the matmuls and attention alone
(used to split a layer's time) 0.2 s; the memory-bound embedding and optimizer 0.1 s.  Only on CUDA devices."""


def repeats(expected_s: float) -> tuple[int, int]:
    """(warmup, timed) iterations of a point expected to take ``expected_s`` per iteration."""
    return (1, 3) if expected_s > LONG_S else (WARMUP, REPEATS)


@dataclass(frozen=True, kw_only=True, slots=True)
class Rates:
    """Rough rates for planning a run (not for predictions): what :func:`estimate_s` assumes of a GPU."""

    gemm_flops: float = 600e12
    """bf16 GEMMs of layer shapes on an H200: 573-798 TFLOP/s measured (issue 16)."""
    attention_flops: float = 300e12
    """SDPA forward + backward: 193-525 TFLOP/s measured (issue 16)."""
    bandwidth: float = 3.0e12
    """Elementwise traffic, below the 4.25 TB/s copy rate."""
    launch_s: float = 0.4e-3
    """Host time of an eager layer's forward + backward (its floor at small shapes)."""
    setup_s: float = 0.03
    """Building one point's modules and inputs."""


def _layer_s(la: LayerShape, r: Rates) -> float:
    mm = la.gemm_flops() + 2.0 * la.recompute_flops()
    ew = 60.0 * la.tokens * la.hidden * (1.5 if la.ac in ("full", "op") else 1.0)
    return max(r.launch_s, mm / r.gemm_flops + la.attention().flops() / r.attention_flops + ew / r.bandwidth)


def expected_s(kind: str, shape, rates: Rates | None = None) -> float:
    """Expected seconds of one iteration of a point of ``kind`` (planning only: :class:`Rates`)."""
    r = rates or Rates()
    if kind == "layer":
        return _layer_s(shape, r)
    if kind == "kernels":
        return _layer_s(shape, r) * 0.75
    if kind == "attention":
        return max(1e-4, shape.flops() / r.attention_flops)
    if kind == "embedding":
        return max(1e-4, shape.nbytes() / r.bandwidth)
    if kind == "head":
        return max(2e-4, shape.flops() / r.gemm_flops + 16.0 * shape.tokens * shape.vocab / r.bandwidth)
    if kind == "optimizer":
        return max(1e-4, 28.0 * shape.params() / r.bandwidth)
    la = shape.layer
    emb = EmbeddingShape(vocab=shape.vocab, hidden=la.hidden, seq=la.seq, mb=la.mb)
    params = shape.layers * la.mm_params() + 2 * shape.vocab * la.hidden
    return (shape.layers * _layer_s(la, r) + emb.nbytes() / r.bandwidth
            + 6.0 * la.tokens * la.hidden * shape.vocab / r.gemm_flops + 16.0 * la.tokens * shape.vocab / r.bandwidth
            + 28.0 * params / r.bandwidth)


def work(grid: Grid) -> list[tuple[str, object]]:
    """Every point ``gpucomm measure`` times for ``grid``, cheapest and most used first (an interrupted run keeps
    them): attention, embedding, head, optimizer, whole steps; then, tp by tp from 1, each layer with its own
    attention and, at ``ac=none``, its matmuls alone."""
    out: list[tuple[str, object]] = [("attention", a) for a in grid.attention]
    out += [("embedding", e) for e in grid.embeddings] + [("head", h) for h in grid.heads]
    out += [("optimizer", o) for o in grid.optimizers] + [("step", st) for st in grid.steps]
    seen = set(grid.attention)
    for tp in sorted({s.tp for s in grid.layers}):
        for s in (la for la in grid.layers if la.tp == tp):
            out.append(("layer", s))
            if s.ac == "none":
                out.append(("kernels", s))
                if s.attention() not in seen:
                    seen.add(s.attention())
                    out.append(("attention", s.attention()))
    return out


def estimate_s(grid: Grid, rates: Rates | None = None, step_rounds: int = STEP_ROUNDS) -> float:
    """Expected wall time of timing ``grid``'s points on a GPU (iterations x expected time, the settling run
    :data:`SETTLE_S`, and setup, per point; each whole step ``step_rounds`` times).  The busy pass after it is
    not counted."""
    r = rates or Rates()
    total = 0.0
    for kind, shape in work(grid):
        t = expected_s(kind, shape, r)
        warm, timed = (1, 3) if kind == "kernels" else repeats(t)
        total += ((warm + timed) * t + r.setup_s + max(SETTLE_S[kind], t)) * (max(1, step_rounds)
                                                                               if kind == "step" else 1)
    return total
