"""The model-shape table: parameter counts against published figures and the real modules."""

import pytest

from gpucomm import models


@pytest.mark.parametrize("name, published", [
    ("llama2-7b", 6_738_415_616),    # HF meta-llama/Llama-2-7b-hf parameter count
    ("llama3-8b", 8_030_261_248),    # HF meta-llama/Meta-Llama-3-8B
    ("llama3-70b", 70_553_706_496),  # HF meta-llama/Meta-Llama-3-70B
    ("llama3-405b", 405_853_388_800),  # HF meta-llama/Llama-3.1-405B
])
def test_llama_params_match_published_counts(name, published):
    assert models.get(name).params() == published


def test_gpt_params_formula():
    a = models.get("gpt-124m")
    d, v, t, layers = 768, 50304, 1024, 12
    assert a.params() == v * d + t * d + layers * (12 * d * d + 13 * d) + 2 * d


@pytest.mark.parametrize("name", ["gpt-tiny", "gpt-124m", "gpt-350m"])
def test_gpt_presets_match_train_modules(name):
    torch = pytest.importorskip("torch")
    import os

    from gpucomm.train.models import GPT, GPTConfig

    a = models.get(name)
    before = dict(os.environ)
    try:  # building on the meta device allocates nothing (gpt-350m stays cheap)
        with torch.device("meta"):
            m = GPT(GPTConfig(n_layer=a.layers, d_model=a.hidden, n_head=a.heads, vocab=a.vocab, seq_len=a.seq))
    finally:  # torch may set cache variables on first use; they are not this test's doing
        os.environ.clear()
        os.environ.update(before)
    assert sum(p.numel() for p in m.parameters()) == a.params()


def test_flops_per_token_includes_attention():
    a = models.get("gpt3-175b")
    assert a.flops_per_token(4096) - a.flops_per_token(2048) == 12 * 96 * 12288 * 2048
    assert a.forward_flops_per_token() * 3 == pytest.approx(a.flops_per_token())


def test_no_torch_import():
    import subprocess
    import sys

    code = "import sys, gpucomm.models; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


@pytest.mark.parametrize("kw, word", [({"heads": 5}, "heads=5"), ({"kv_heads": 3}, "kv_heads=3"),
                                      ({"layers": 0}, "layers=0"), ({"ffn_kind": "relu"}, "relu")])
def test_bad_shapes_name_the_field(kw, word):
    base = dict(name="x", layers=2, hidden=64, heads=4, kv_heads=4, ffn_hidden=256, ffn_kind="gelu-4h",
                vocab=10, seq=8, tied_embeddings=True)
    with pytest.raises(ValueError, match=word):
        models.Architecture(**{**base, **kw})


def test_unknown_preset():
    with pytest.raises(ValueError, match="llama3-8b"):
        models.get("nosuch")


def test_layer_matmuls_are_the_layer_matrix_weights_in_forward_order():
    for name in ("gpt-124m", "llama3-8b", "llama2-70b"):
        arch = models.get(name)
        per_layer = (arch.matmul_params() - arch.vocab * arch.hidden) // arch.layers
        assert sum(i * o for _, i, o in arch.layer_matmuls()) == per_layer
    names = [n for n, _, _ in models.get("llama3-8b").layer_matmuls()]
    assert names == ["wq", "wk", "wv", "wo", "w1", "w3", "w2"]
    assert models.get("llama3-8b").layer_matmuls()[1] == ("wk", 4096, 1024)
