"""Synthetic compute profiles whose every lookup can be computed by hand.

Per-FLOP (per-byte) constants, so that a lookup inside the grid is a hand product; the layer's rest per matmul
FLOP follows a power law in tokens (``REST / sqrt(tokens / 1024)``), so that the log-space interpolation
between two token counts is exact and checkable.
"""

from __future__ import annotations

import math

from gpucomm.advisor.compute.profile import ComputeProfile
from gpucomm.advisor.compute.shapes import (
    AttentionShape,
    EmbeddingShape,
    HeadShape,
    LayerShape,
    OptimizerShape,
)

ATTN = 2e-15
"""Attention seconds per forward FLOP (forward); backward 2.5x."""
REST = 3e-15
"""A layer's rest (everything but attention) per matmul FLOP at 1,024 tokens."""
GEMM = 1e-15
"""Matmuls alone per matmul FLOP (a third forward)."""
EXTRA = {"full": 1.5e-15, "op": 2e-15, "selective": 1e-15}
"""Recomputation's extra seconds per recomputed FLOP."""
EMB = 1e-12
"""Embedding seconds per normalising byte."""
HEAD = 4e-15
"""Head and loss seconds per FLOP."""
OPT = 1e-11
"""Optimizer seconds per parameter."""
MARGIN = 0.5
"""Reserved beyond allocated, per byte of fp32 logits."""
TOKENS = (1024, 4096)
HIDDEN = (1024, 2048)


def rest_per_flop(tokens: float) -> float:
    return REST / math.sqrt(tokens / 1024)


def layer_shape(family: str, hidden: int, tokens: int, ac: str = "none", tp: int = 1) -> LayerShape:
    heads = hidden // 128
    kv = max(1, heads // 4) if family == "llama" else heads
    ffn = 4 * hidden if family == "gpt" else 3 * hidden
    return LayerShape(family=family, hidden=hidden, heads=heads, kv_heads=kv, ffn=ffn, tp=tp, seq=1024,
                      mb=tokens // 1024, ac=ac)


def attention_point(a: AttentionShape) -> dict:
    return {**a.key(), "fwd_s": ATTN * a.fwd_flops(), "bwd_s": 2.5 * ATTN * a.fwd_flops()}


def layer_time(s: LayerShape) -> tuple[float, float]:
    """(fwd, bwd) of a synthetic layer point."""
    a = s.attention()
    rest = rest_per_flop(s.tokens) * s.gemm_flops()
    extra = EXTRA.get(s.ac, 0.0) * s.recompute_flops()
    return ATTN * a.fwd_flops() + rest / 3, 2.5 * ATTN * a.fwd_flops() + 2 * rest / 3 + extra


def synthetic(families=("gpt", "llama"), acs=("none", "selective", "op", "full"), gpu: str = "NVIDIA H200",
              steps: bool = True, **device) -> ComputeProfile:
    layers, kernels, attention = [], [], {}
    for fam in families:
        for h in HIDDEN:
            for t in TOKENS:
                for ac in acs:
                    s = layer_shape(fam, h, t, ac)
                    f, b = layer_time(s)
                    layers.append({**s.key(), "fwd_s": f, "bwd_s": b})
                s = layer_shape(fam, h, t)
                attention[s.attention()] = None
                kernels.append({**s.key(), "gemm_fwd_s": GEMM * s.gemm_flops() / 3,
                                "gemm_bwd_s": 2 * GEMM * s.gemm_flops() / 3})
    for seq in (512, 8192):
        for rows in (4, 256):
            attention[AttentionShape(head_dim=128, heads=rows, seq=seq)] = None
    embeddings = [{**e.key(), "seconds": EMB * e.nbytes()}
                  for e in (EmbeddingShape(vocab=v, hidden=h, seq=1024, mb=m) for v in (50304, 128256)
                            for h in HIDDEN for m in (1, 4))]
    heads = [{**hs.key(), "seconds": HEAD * hs.flops()}
             for hs in (HeadShape(family=fam, vocab=50304, hidden=h, seq=1024, mb=m, loss=loss)
                        for fam in ("gpt", "llama") for h in HIDDEN for m in (1, 4)
                        for loss in ("upcast", "autocast"))]
    optimizers = [{**o.key(), "params": o.params(), "seconds": OPT * o.params()}
                  for o in (OptimizerShape(width=256, layers=1), OptimizerShape(width=2048, layers=4))]
    step_rows = []
    if steps:
        for fam in families:
            for h in HIDDEN:
                for t in TOKENS:
                    s = layer_shape(fam, h, t)
                    logits = 4.0 * t * 50304
                    step_rows.append({"layer": s.key(), "vocab": 50304, "layers": 2, "loss": "upcast",
                                      "seconds": 1.0, "peak_allocated_bytes": 10 * 2**30,
                                      "peak_reserved_bytes": 10 * 2**30 + MARGIN * logits})
    dev = {"type": "cuda", "name": gpu, "power_limit_w": 700.0, "sm_clock_sustained_mhz": 1755,
           "copy_gbps": 4000.0, **device}
    return ComputeProfile(device=dev, software="eager", precision="bf16", grid="synthetic",
                          env={"versions": {"torch": "test"}},
                          points={"layer": layers, "kernels": kernels,
                                  "attention": [attention_point(a) for a in attention], "embedding": embeddings,
                                  "head": heads, "optimizer": optimizers, "step": step_rows},
                          source="synthetic.json")
