"""Model shapes as data: the one table of architectures that ``gpucomm train`` and ``gpucomm advise`` read.

An :class:`Architecture` is a decoder-only transformer described by the numbers that decide its parameter
count, FLOPs and activation memory: layers ``L``, hidden ``h``, heads ``a`` and KV heads (GQA), the MLP's
hidden width ``f`` and kind (``gelu-4h``: two matrices; ``swiglu``: three), vocabulary ``V``, context
length ``s``, tied or untied output head, learned or rotary positions, and whether linears and norms carry
biases (GPT-2's LayerNorm + biased Linear) or not (Llama's RMSNorm, no biases).  Nothing here imports torch.

Parameter count, exactly as the modules hold them::

    embeddings  V h  (+ s h learned positions)           head  V h unless tied
    per layer   attention  h (h + 2 kv d_head) + h h    (+ h + 2 kv d_head + h biases)
                MLP        gelu-4h: 2 h f  (+ f + h)     swiglu: 3 h f
                norms      2 x (2 h LayerNorm | h RMSNorm)
    final norm  2 h | h

Model FLOPs per token (training, forward + backward) are the convention of PaLM (Chowdhery et al. 2022,
App. B), torchtitan and LLM Foundry: ``6 N_mm + 12 L h s`` where ``N_mm`` counts the parameters that take
part in a matrix multiply (every layer weight and the output head; not the embedding lookup, not norms and
biases) and ``12 L h s`` is attention's ``Q K^T`` and ``A V`` (2 x 2 s h per layer per token forward, times 3),
without halving for causal masking.  Activation recomputation adds FLOPs to the time, never to the MFU.

Presets and their sources:

* ``gpt-tiny``, ``gpt-124m``, ``gpt-350m``: ``gpucomm.train``'s nanoGPT-style models (GPT-2 small/medium
  shapes, Radford et al. 2019; vocabulary 50304 = 50257 padded to a multiple of 64, as nanoGPT does).
* ``llama2-7b/13b/70b``: Touvron et al. 2023, "Llama 2", Table 1 and the released ``config.json``
  (ffn 11008 / 13824 / 28672, 70B with 8 KV heads).
* ``llama3-8b/70b/405b``: Llama Team 2024, "The Llama 3 Herd of Models", Table 3 (8B: 32 x 4096, ffn 14336;
  70B: 80 x 8192, ffn 28672; 405B: 126 x 16384, ffn 53248; 8 KV heads, vocabulary 128256, context 8192).
* ``gpt3-175b``: Brown et al. 2020, "Language Models are Few-Shot Learners", Table 2.1 (96 x 12288,
  96 heads, context 2048; vocabulary 50257, tied embeddings, learned positions).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ARCHITECTURES", "Architecture", "FFN_KINDS", "get", "names"]

FFN_KINDS = ("gelu-4h", "swiglu")


@dataclass(frozen=True, kw_only=True, slots=True)
class Architecture:
    """One decoder-only transformer's shape (see the module docstring for the formulas)."""

    name: str
    layers: int
    """Transformer blocks ``L``."""
    hidden: int
    """Residual stream width ``h``."""
    heads: int
    """Attention (query) heads ``a``; divides ``hidden``."""
    kv_heads: int
    """Key/value heads (grouped-query attention); equals ``heads`` for multi-head attention."""
    ffn_hidden: int
    """MLP inner width ``f`` (4h for GPT; 8h/3 rounded for Llama's SwiGLU)."""
    ffn_kind: str
    """"gelu-4h" (up, down) or "swiglu" (gate, up, down)."""
    vocab: int
    """Vocabulary ``V`` (as the embedding holds it, padding included)."""
    seq: int
    """Context length ``s`` a training sample uses by default."""
    tied_embeddings: bool
    """The output head shares the token embedding's weight."""
    learned_positions: bool = False
    """A learned position table of ``seq x hidden`` (GPT); False for rotary embeddings (Llama)."""
    biases: bool = False
    """Linear biases and LayerNorm (GPT-2); False: no biases and RMSNorm (Llama)."""
    dropout: bool = False
    """Trained with dropout after attention and after the MLP (Megatron's GPT, GPT-3): each keeps a 1-byte
    mask per element for backward.  False for ``gpucomm.train``'s GPTs (nanoGPT's ``dropout=0.0``) and Llama."""
    source: str = ""
    """Where the figures come from."""

    def __post_init__(self) -> None:
        for key in ("layers", "hidden", "heads", "kv_heads", "ffn_hidden", "vocab", "seq"):
            v = getattr(self, key)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f"{key}={v!r}: expected an integer >= 1; fix the architecture's {key}")
        if self.hidden % self.heads:
            raise ValueError(f"heads={self.heads}: must divide hidden={self.hidden}; pick heads dividing it")
        if self.heads % self.kv_heads:
            raise ValueError(f"kv_heads={self.kv_heads}: must divide heads={self.heads}; pick a divisor")
        if self.ffn_kind not in FFN_KINDS:
            raise ValueError(f"ffn kind {self.ffn_kind!r}: expected one of {', '.join(FFN_KINDS)}")

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    @property
    def kv_dim(self) -> int:
        """Width of K (and of V): ``kv_heads x head_dim``."""
        return self.kv_heads * self.head_dim

    def attention_params(self) -> int:
        """One layer's attention weights (and biases): Q, K, V and the output projection."""
        h, kv = self.hidden, self.kv_dim
        return h * (h + 2 * kv) + h * h + ((h + 2 * kv + h) if self.biases else 0)

    def mlp_params(self) -> int:
        """One layer's MLP weights (and biases)."""
        h, f = self.hidden, self.ffn_hidden
        if self.ffn_kind == "swiglu":
            return 3 * h * f
        return 2 * h * f + ((f + h) if self.biases else 0)

    def norm_params(self) -> int:
        """One norm: LayerNorm's weight and bias, or RMSNorm's weight."""
        return 2 * self.hidden if self.biases else self.hidden

    def layer_params(self) -> int:
        """One transformer block: attention + MLP + two norms."""
        return self.attention_params() + self.mlp_params() + 2 * self.norm_params()

    def embedding_params(self) -> int:
        """Token embedding (+ learned positions); the head too when tied (it is the same tensor)."""
        return self.vocab * self.hidden + (self.seq * self.hidden if self.learned_positions else 0)

    def head_params(self) -> int:
        """The output head's own parameters: 0 when tied."""
        return 0 if self.tied_embeddings else self.vocab * self.hidden

    def params(self) -> int:
        """Every parameter the model holds (tied weights counted once)."""
        return (self.embedding_params() + self.layers * self.layer_params() + self.norm_params()
                + self.head_params())

    def layer_matmuls(self) -> list[tuple[str, int, int]]:
        """One block's weight matrix multiplies in forward order, as ``(name, in, out)`` widths per token.

        GPT (nanoGPT's and Megatron's fused ``c_attn``/QKV): ``qkv (h -> h + 2 kv)``, ``proj (h -> h)``,
        ``fc (h -> f)``, ``fc2 (f -> h)``.  Llama (torchtitan's and Meta's reference ``model.py``: separate
        ``wq``, ``wk``, ``wv``; SwiGLU ``w2(silu(w1 x) * w3 x)``): ``wq (h -> h)``, ``wk (h -> kv)``,
        ``wv (h -> kv)``, ``wo (h -> h)``, ``w1 (h -> f)``, ``w3 (h -> f)``, ``w2 (f -> h)``.  The order decides
        which outputs torchtitan's per-op activation checkpointing keeps (every other one).
        """
        h, kv, f = self.hidden, self.kv_dim, self.ffn_hidden
        if self.ffn_kind == "swiglu":
            return [("wq", h, h), ("wk", h, kv), ("wv", h, kv), ("wo", h, h), ("w1", h, f), ("w3", h, f),
                    ("w2", f, h)]
        return [("qkv", h, h + 2 * kv), ("proj", h, h), ("fc", h, f), ("fc2", f, h)]

    def matmul_params(self) -> int:
        """Parameters that take part in a matrix multiply per token: layer weights and the head."""
        h, kv, f = self.hidden, self.kv_dim, self.ffn_hidden
        per_layer = h * (h + 2 * kv) + h * h + (3 if self.ffn_kind == "swiglu" else 2) * h * f
        return self.layers * per_layer + self.vocab * h

    def flops_per_token(self, seq: int | None = None) -> float:
        """Model FLOPs per trained token: ``6 N_mm + 12 L h s`` (forward + backward, no recompute)."""
        s = self.seq if seq is None else seq
        return 6.0 * self.matmul_params() + 12.0 * self.layers * self.hidden * s

    def forward_flops_per_token(self, seq: int | None = None) -> float:
        """One forward pass: a third of :meth:`flops_per_token` (what full recomputation repeats)."""
        return self.flops_per_token(seq) / 3.0


def _gpt(name: str, layers: int, hidden: int, heads: int, vocab: int, seq: int, source: str,
         dropout: bool = False) -> Architecture:
    return Architecture(name=name, layers=layers, hidden=hidden, heads=heads, kv_heads=heads,
                        ffn_hidden=4 * hidden, ffn_kind="gelu-4h", vocab=vocab, seq=seq, tied_embeddings=True,
                        learned_positions=True, biases=True, dropout=dropout, source=source)


def _llama(name: str, layers: int, hidden: int, heads: int, kv_heads: int, ffn: int, vocab: int, seq: int,
           source: str) -> Architecture:
    return Architecture(name=name, layers=layers, hidden=hidden, heads=heads, kv_heads=kv_heads, ffn_hidden=ffn,
                        ffn_kind="swiglu", vocab=vocab, seq=seq, tied_embeddings=False, source=source)


_NANO = "gpucomm.train's nanoGPT-style GPT (GPT-2 shape, Radford et al. 2019; vocab padded to 50304)"
_L2 = "Touvron et al. 2023, Llama 2, Table 1 + released config.json"
_L3 = "Llama Team 2024, The Llama 3 Herd of Models, Table 3"

ARCHITECTURES: dict[str, Architecture] = {a.name: a for a in (
    _gpt("gpt-tiny", 2, 64, 4, 256, 32, "gpucomm.train's CPU test model (about 0.1 M parameters)"),
    _gpt("gpt-124m", 12, 768, 12, 50304, 1024, _NANO),
    _gpt("gpt-350m", 24, 1024, 16, 50304, 1024, _NANO),
    _llama("llama2-7b", 32, 4096, 32, 32, 11008, 32000, 4096, _L2),
    _llama("llama2-13b", 40, 5120, 40, 40, 13824, 32000, 4096, _L2),
    _llama("llama2-70b", 80, 8192, 64, 8, 28672, 32000, 4096, _L2),
    _llama("llama3-8b", 32, 4096, 32, 8, 14336, 128256, 8192, _L3),
    _llama("llama3-70b", 80, 8192, 64, 8, 28672, 128256, 8192, _L3),
    _llama("llama3-405b", 126, 16384, 128, 8, 53248, 128256, 8192, _L3),
    _gpt("gpt3-175b", 96, 12288, 96, 50257, 2048, "Brown et al. 2020, Language Models are Few-Shot Learners, "
                                                  "Table 2.1", dropout=True),
)}
"""Every preset, by name."""


def names() -> list[str]:
    """Preset names, in table order."""
    return list(ARCHITECTURES)


def get(name: str) -> Architecture:
    """The preset called ``name``.

    Raises:
        ValueError: unknown name (the message lists the known ones).
    """
    arch = ARCHITECTURES.get(str(name).lower())
    if arch is None:
        raise ValueError(f"model {name!r}: no such preset; expected one of {', '.join(ARCHITECTURES)}")
    return arch
