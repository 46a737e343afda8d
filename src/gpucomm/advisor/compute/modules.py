"""The modules a compute profile times: written the way users write them, at one GPU's share of a layout.

Each is plain PyTorch — ``nn.Linear``, ``nn.LayerNorm``, ``F.scaled_dot_product_attention``, a hand-written
RMSNorm and rotary embedding as in Meta's Llama reference ``model.py`` — with fp32 weights run under bf16
autocast (our "bf16"), so that what is timed is what a user's eager loop runs, launch gaps, casts and
elementwise kernels included.  Shapes are :mod:`gpucomm.advisor.compute.shapes`'.  Tensor parallel is
represented by the per-GPU widths alone (the collectives are priced elsewhere); no dropout (nanoGPT's default
``dropout=0.0``).

Activation checkpointing (as :mod:`gpucomm.advisor.memory` defines the modes):

* ``full``: ``torch.utils.checkpoint.checkpoint`` around the layer (non-reentrant);
* ``selective`` (Megatron's): around the attention core (SDPA) only;
* ``op`` (torchtitan's per-op policy): around the layer, saving the outputs of SDPA and of every other
  matmul (``aten.mm``/``aten.addmm``, counted in forward order), recomputing everything else.

This module imports torch; only the measuring command loads it.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import CheckpointPolicy, checkpoint, create_selective_checkpoint_contexts

from gpucomm.advisor.compute.shapes import EmbeddingShape, HeadShape, LayerShape

__all__ = ["Embedding", "Head", "RMSNorm", "Stack", "init_", "layer"]


class RMSNorm(nn.Module):
    """Llama's RMSNorm as Meta's reference writes it (normalised in fp32, cast back)."""

    def __init__(self, dim: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)).type_as(x) * self.weight


def _rotary(seq: int, head_dim: int, device: torch.device) -> torch.Tensor:
    freqs = 1.0 / (500000.0 ** (torch.arange(0, head_dim, 2, device=device)[: head_dim // 2].float() / head_dim))
    t = torch.arange(seq, device=device).float()
    return torch.polar(torch.ones(seq, head_dim // 2, device=device), torch.outer(t, freqs))


def _apply_rotary(x: torch.Tensor, freqs: torch.Tensor) -> torch.Tensor:
    xc = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
    return torch.view_as_real(xc * freqs[None, :, None, :]).flatten(3).type_as(x)


def _sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def _repeat_kv(x: torch.Tensor, n: int) -> torch.Tensor:
    """``(b, s, kv, d)`` -> ``(b, s, kv * n, d)``, as Meta's and torchtitan's ``repeat_kv``."""
    if n == 1:
        return x
    b, s, kv, d = x.shape
    return x[:, :, :, None, :].expand(b, s, kv, n, d).reshape(b, s, kv * n, d)


class _Layer(nn.Module):
    def __init__(self, shape: LayerShape) -> None:
        super().__init__()
        self.shape = shape
        self.hq, self.hkv, self.d = shape.local_heads, shape.local_kv_heads, shape.head_dim

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """``(b, s, heads, d)`` inputs; K and V repeated to every query head; SDPA; back to ``(b, s, heads d)``."""
        k, v = _repeat_kv(k, self.hq // self.hkv), _repeat_kv(v, self.hq // self.hkv)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        if self.shape.ac == "selective":
            y = checkpoint(_sdpa, q, k, v, use_reentrant=False)
        else:
            y = _sdpa(q, k, v)
        b, _, s, _ = y.shape
        return y.transpose(1, 2).reshape(b, s, self.hq * self.d)


class GPTLayer(_Layer):
    """nanoGPT's ``Block``: LayerNorm, fused QKV, SDPA, projection, GeLU MLP, biases everywhere."""

    def __init__(self, shape: LayerShape) -> None:
        super().__init__(shape)
        (_, h, qkv), (_, q, _), (_, _, f), _ = shape.matmuls()
        self.ln_1, self.ln_2 = nn.LayerNorm(h), nn.LayerNorm(h)
        self.c_attn, self.c_proj = nn.Linear(h, qkv), nn.Linear(q, h)
        self.c_fc, self.mlp_proj = nn.Linear(h, f), nn.Linear(f, h)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, _ = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split([self.hq * self.d, self.hkv * self.d, self.hkv * self.d], dim=2)
        y = self.attend(q.view(b, s, self.hq, self.d), k.view(b, s, self.hkv, self.d),
                        v.view(b, s, self.hkv, self.d))
        x = x + self.c_proj(y)
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x))))


class LlamaLayer(_Layer):
    """Meta's Llama ``TransformerBlock``: RMSNorm, ``wq``/``wk``/``wv``, rotary, ``repeat_kv``, SDPA, ``wo``,
    SwiGLU ``w2(silu(w1 x) * w3 x)``, no biases."""

    def __init__(self, shape: LayerShape) -> None:
        super().__init__(shape)
        (_, h, q), (_, _, kv), _, _, (_, _, f), _, _ = shape.matmuls()
        self.attention_norm, self.ffn_norm = RMSNorm(h), RMSNorm(h)
        self.wq, self.wk, self.wv = nn.Linear(h, q, bias=False), nn.Linear(h, kv, bias=False), \
            nn.Linear(h, kv, bias=False)
        self.wo = nn.Linear(q, h, bias=False)
        self.w1, self.w3, self.w2 = nn.Linear(h, f, bias=False), nn.Linear(h, f, bias=False), \
            nn.Linear(f, h, bias=False)
        self.freqs: torch.Tensor | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, _ = x.shape
        if self.freqs is None or self.freqs.shape[0] != s or self.freqs.device != x.device:
            self.freqs = _rotary(s, self.d, x.device)
        xn = self.attention_norm(x)
        q = _apply_rotary(self.wq(xn).view(b, s, self.hq, self.d), self.freqs)
        k = _apply_rotary(self.wk(xn).view(b, s, self.hkv, self.d), self.freqs)
        x = x + self.wo(self.attend(q, k, self.wv(xn).view(b, s, self.hkv, self.d)))
        xn = self.ffn_norm(x)
        return x + self.w2(F.silu(self.w1(xn)) * self.w3(xn))


_MATMULS = {"mm", "addmm"}


def _op_policy():
    """torchtitan's per-op selective checkpointing: save SDPA's outputs and every other matmul's."""
    counts = {"forward": 0, "recompute": 0}

    def policy(ctx, func, *args, **kwargs):
        name = func._overloadpacket.__name__
        mode = "recompute" if ctx.is_recompute else "forward"
        if name in _MATMULS:
            counts[mode] += 1
            return CheckpointPolicy.MUST_SAVE if counts[mode] % 2 == 1 else CheckpointPolicy.PREFER_RECOMPUTE
        if "scaled_dot_product" in name:
            return CheckpointPolicy.MUST_SAVE
        return CheckpointPolicy.PREFER_RECOMPUTE

    return create_selective_checkpoint_contexts(policy)


class Checkpointed(nn.Module):
    """A layer under its checkpointing mode (``full`` or ``op``; ``selective`` lives inside the layer)."""

    def __init__(self, inner: _Layer) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ac = self.inner.shape.ac
        if ac == "full":
            return checkpoint(self.inner, x, use_reentrant=False)
        if ac == "op":
            return checkpoint(self.inner, x, use_reentrant=False, context_fn=_op_policy)
        return self.inner(x)


def layer(shape: LayerShape) -> nn.Module:
    """The module of one layer shape, its checkpointing mode applied."""
    inner: _Layer = LlamaLayer(shape) if shape.family == "llama" else GPTLayer(shape)
    return Checkpointed(inner) if shape.ac in ("full", "op") else inner


class Embedding(nn.Module):
    """Token embedding (and GPT's learned positions); its output is the fp32 residual stream."""

    def __init__(self, shape: EmbeddingShape) -> None:
        super().__init__()
        self.wte = nn.Embedding(shape.vocab, shape.hidden)
        self.wpe = nn.Embedding(shape.seq, shape.hidden) if shape.positions else None

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        x = self.wte(idx)
        if self.wpe is not None:
            x = x + self.wpe(torch.arange(idx.shape[1], device=idx.device))
        return x


class Head(nn.Module):
    """Final norm, output projection and the loss (``upcast``: ``F.cross_entropy(logits.float(), y)``;
    ``autocast``: on the bf16 logits, autocast running the log-softmax in fp32)."""

    def __init__(self, shape: HeadShape, weight: nn.Parameter | None = None) -> None:
        super().__init__()
        self.norm = RMSNorm(shape.hidden) if shape.family == "llama" else nn.LayerNorm(shape.hidden)
        self.lm_head = nn.Linear(shape.hidden, shape.vocab, bias=False)
        if weight is not None:  # GPT ties the head to the token embedding
            self.lm_head.weight = weight
        self.upcast = shape.loss == "upcast"

    def forward(self, x: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        logits = self.lm_head(self.norm(x))
        if self.upcast:
            logits = logits.float()
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))


class Stack(nn.Module):
    """A whole small model: embedding, layers, head and loss (GPT ties the head)."""

    def __init__(self, emb: EmbeddingShape, layers: list[LayerShape], head: HeadShape) -> None:
        super().__init__()
        self.embedding = Embedding(emb)
        self.layers = nn.ModuleList(layer(s) for s in layers)
        self.head = Head(head, self.embedding.wte.weight if head.family == "gpt" else None)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        x = self.embedding(idx)
        for block in self.layers:
            x = block(x)
        return self.head(x, targets)


def init_(module: nn.Module) -> nn.Module:
    """Small normal weights (GPT-2's 0.02), so that bf16 activations stay finite across repeated steps."""
    with torch.no_grad():
        for name, p in module.named_parameters():
            if p.dim() >= 2:
                p.normal_(0.0, 0.02)
            elif name.endswith("bias"):
                p.zero_()
    return module

