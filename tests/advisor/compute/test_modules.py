"""The measured modules compute what the plain models compute, under every checkpointing mode."""

import pytest
import torch

from gpucomm.advisor.compute import modules
from gpucomm.advisor.compute.shapes import EmbeddingShape, HeadShape, LayerShape


@pytest.mark.parametrize("family", ["gpt", "llama"])
def test_checkpointing_modes_change_memory_not_the_gradients(family):
    base = LayerShape(family=family, hidden=32, heads=4, kv_heads=2 if family == "llama" else 4, ffn=64, seq=8, mb=2)
    torch.manual_seed(0)
    ref = modules.init_(modules.layer(base))
    x = torch.randn(2, 8, 32, requires_grad=True)
    ref(x).square().sum().backward()
    want = [p.grad.clone() for p in ref.parameters()]
    for ac in ("selective", "op", "full"):
        m = modules.layer(LayerShape(**{**base.key(), "ac": ac}))
        m.load_state_dict(ref.state_dict() if ac == "selective" else {f"inner.{k}": v for k, v in
                                                                       ref.state_dict().items()})
        x2 = x.detach().clone().requires_grad_()
        m(x2).square().sum().backward()
        for g, w in zip([p.grad for p in m.parameters()], want, strict=True):
            torch.testing.assert_close(g, w)


def test_tensor_parallel_shapes_are_one_gpus_share():
    s = LayerShape(family="llama", hidden=64, heads=8, kv_heads=2, ffn=96, tp=4, seq=4)
    m = modules.layer(s)
    assert m.wq.weight.shape == (16, 64) and m.wk.weight.shape == (8, 64) and m.w1.weight.shape == (24, 64)
    assert m(torch.randn(1, 4, 64)).shape == (1, 4, 64)


def test_the_head_ties_and_the_loss_upcasts_or_not():
    emb = modules.Embedding(EmbeddingShape(vocab=50, hidden=16, seq=4, positions=True))
    head = modules.Head(HeadShape(family="gpt", vocab=50, hidden=16, seq=4), emb.wte.weight)
    assert head.lm_head.weight is emb.wte.weight and head.upcast
    idx = torch.randint(0, 50, (2, 4))
    assert head(emb(idx), idx).dim() == 0
    assert not modules.Head(HeadShape(family="llama", vocab=50, hidden=16, seq=4, loss="autocast")).upcast
