"""Measured shapes: one GPU's share of a layer, the grids, and their planned wall time."""

import pytest

from gpucomm import models
from gpucomm.advisor.compute import shapes
from gpucomm.advisor.compute.shapes import AttentionShape, LayerShape


def test_a_layer_shape_is_one_gpus_share_of_the_layout():
    s = LayerShape(family="llama", hidden=4096, heads=32, kv_heads=8, ffn=14336, tp=4, seq=2048, mb=2)
    assert s.matmuls() == [("wq", 4096, 1024), ("wk", 4096, 256), ("wv", 4096, 256), ("wo", 1024, 4096),
                           ("w1", 4096, 3584), ("w3", 4096, 3584), ("w2", 3584, 4096)]
    assert s.mm_params() * 4 == shapes.layer_mm_params(models.get("llama3-8b"), 1)
    assert s.gemm_flops() == 6 * 4096 * s.mm_params()
    # tp=16 leaves half a KV head per GPU: at least one
    assert LayerShape(family="llama", hidden=4096, heads=32, kv_heads=8, ffn=14336, tp=16, seq=1).local_kv_heads == 1
    a = s.attention()
    assert (a.heads, a.head_dim, a.rows) == (8, 128, 16)
    assert a.fwd_flops() == 2 * 16 * 2048**2 * 128 and a.flops() == 3.5 * a.fwd_flops()


def test_recomputed_flops_by_mode_stop_before_the_last_matmul():
    """Early-stopping checkpoint never reruns the MLP's output matmul (fc2, 4096 x 1024 of the GPT layer's
    qkv 1024 x 3072, proj 1024 x 1024, fc 1024 x 4096): full reruns qkv, proj, fc and attention; op (saving
    qkv and fc) proj alone; selective attention alone."""
    s = LayerShape(family="gpt", hidden=1024, heads=16, kv_heads=16, ffn=4096, seq=1024, mb=1)
    attn = AttentionShape(head_dim=64, heads=16, seq=1024).fwd_flops()
    full = LayerShape(**{**s.key(), "ac": "full"})
    assert full.recompute_flops() == 2 * 1024 * (3 * 1024**2 + 1024**2 + 4 * 1024**2) + attn
    assert full.recomputed_mm_share() == 8 / 12
    assert LayerShape(**{**s.key(), "ac": "selective"}).recompute_flops() == attn
    op = LayerShape(**{**s.key(), "ac": "op"})
    assert op.recompute_flops() == 2 * 1024 * 1024 * 1024 and op.recomputed_mm_share() == 1 / 12
    llama = LayerShape(family="llama", hidden=1024, heads=8, kv_heads=2, ffn=3072, seq=1024, ac="op")
    # wq 1024x1024, wk 1024x256, wv 1024x256, wo 1024x1024, w1/w3/w2 3 x 1024x3072: op reruns wk, wo, w3
    assert llama.recomputed_mm_share() == (256 + 1024 + 3072) / (1024 + 256 + 256 + 1024 + 3 * 3072)
    assert s.recompute_flops() == 0


def test_the_default_grid_covers_what_a_search_visits_within_the_h200_budget():
    g = shapes.default_grid()
    hidden = {s.hidden for s in g.layers}
    assert min(hidden) == 768 and max(hidden) >= 16384
    assert {s.tp for s in g.layers} == {1, 2, 4, 8} and {s.family for s in g.layers} == {"gpt", "llama"}
    assert {s.ac for s in g.layers} == set(shapes.AC_MODES)
    tokens = {s.tokens for s in g.layers if s.tp == 1}
    assert min(tokens) == 1024 and max(tokens) == 65536
    assert any(s.kv_heads < s.heads for s in g.layers)  # grouped-query attention
    assert {a.head_dim for a in g.attention} == {64, 128} and max(a.seq for a in g.attention) == 8192
    # seconds at the planning rates, settling included: the points once each fit one 600 s device call; the
    # whole steps' further rounds (66 s each at these rates) and the busy pass go on in a --merge if they must
    once = shapes.estimate_s(g, step_rounds=1)
    assert once < 420
    steps = sum(1 for k, _ in shapes.work(g) if k == "step")
    assert steps and shapes.estimate_s(g) > once and shapes.estimate_s(g, step_rounds=3) - once == pytest.approx(
        (shapes.estimate_s(g) - once) / 2)


@pytest.mark.parametrize("grid", [shapes.quick_grid(), shapes.tiny_grid(), shapes.model_grid(models.get("gpt-124m"))])
def test_every_grid_has_every_kind_of_point(grid):
    kinds = {k for k, _ in shapes.work(grid)}
    assert kinds == {"layer", "kernels", "attention", "embedding", "head", "optimizer", "step"}


def test_a_model_grid_measures_that_models_layer_at_each_tp_dividing_its_heads():
    g = shapes.model_grid(models.get("llama3-8b"), seqs=(4096,))
    assert {s.tp for s in g.layers} == {1, 2, 4, 8} and {s.hidden for s in g.layers} == {4096}
    assert {s.ffn for s in g.layers} == {14336} and {s.seq for s in g.layers} == {4096}
