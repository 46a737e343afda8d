from pathlib import Path

import pytest
import torch

from gpucomm.train.models import GPT, MODELS, GPTConfig, ModelError, load_workload

HERE = Path(__file__).parent


@pytest.fixture
def example_path(monkeypatch):
    monkeypatch.syspath_prepend(str(HERE))


def _same(a, b):
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


@pytest.mark.parametrize("name", ["gpt-tiny", "mlp"])
def test_builds_the_same_weights_every_time(name):
    w = load_workload(name, seed=3)
    assert _same(w.build_model(), w.build_model())
    assert _same(w.build_model(), load_workload(name, seed=3).build_model())
    assert not _same(w.build_model(), load_workload(name, seed=4).build_model())


@pytest.mark.parametrize("name", ["gpt-tiny", "mlp"])
def test_batches_depend_only_on_seed_and_step(name):
    w = load_workload(name)
    x1, y1 = w.batch_fn(0, 5, 8)
    x2, y2 = w.batch_fn(0, 5, 8)
    assert torch.equal(x1, x2) and torch.equal(y1, y2)
    assert not torch.equal(w.batch_fn(0, 6, 8)[0], x1)
    assert not torch.equal(w.batch_fn(1, 5, 8)[0], x1)
    assert x1.shape[0] == y1.shape[0] == 8


def test_gpt_batch_is_next_token_shifted():
    w = load_workload("gpt-tiny")
    x, y = w.batch_fn(0, 0, 4)
    assert x.shape == (4, 32) and x.dtype == torch.int64
    assert torch.equal(x[:, 1:], y[:, :-1])
    assert int(x.max()) < 256


def _gpt_params(c: GPTConfig) -> int:
    # embeddings (head tied) + per block: qkv, proj, fc, mlp_proj weights+biases, two LayerNorms + ln_f
    return c.vocab * c.d_model + c.seq_len * c.d_model + c.n_layer * (12 * c.d_model**2 + 13 * c.d_model) \
        + 2 * c.d_model


@pytest.mark.parametrize("cfg", [GPTConfig(n_layer=2, d_model=64, n_head=4, vocab=256, seq_len=32),
                                 GPTConfig(n_layer=3, d_model=48, n_head=2, vocab=100, seq_len=7)])
def test_gpt_parameter_count_formula(cfg):
    model = GPT(cfg)
    assert sum(p.numel() for p in model.parameters()) == _gpt_params(cfg)  # tied head counted once
    assert model.lm_head.weight is model.wte.weight


def test_gpt_124m_has_124m_parameters():
    n = _gpt_params(GPTConfig(n_layer=12, d_model=768, n_head=12, vocab=50304, seq_len=1024))
    assert 124_000_000 < n < 125_000_000


def test_gpt_forward_shape_and_causality():
    w = load_workload("gpt-tiny")
    model = w.build_model()
    x, _ = w.batch_fn(0, 0, 2)
    out = model(x)
    assert out.shape == (2, 32, 256)
    x2 = x.clone()
    x2[:, -1] = (x2[:, -1] + 1) % 256  # change the last token only
    assert torch.allclose(model(x2)[:, :-1], out[:, :-1])  # earlier positions cannot see it


def test_seq_len_override():
    assert load_workload("gpt-tiny", seq_len=16).batch_fn(0, 0, 2)[0].shape == (2, 16)
    with pytest.raises(ModelError, match="--seq-len"):
        load_workload("mlp", seq_len=16)


def test_unknown_model_lists_valid_names():
    with pytest.raises(ModelError) as info:
        load_workload("gpt-7b")
    for name in MODELS:
        assert name in str(info.value)
    assert "pkg.module:factory" in str(info.value)


def test_user_factory(example_path):
    w = load_workload("gpucomm_train_factory_example:factory", seed=1)
    assert _same(w.build_model(), w.build_model())
    x, y = w.batch_fn(0, 0, 4)
    loss = w.loss_fn(w.build_model()(x), y)
    assert loss.dim() == 0 and loss.requires_grad


@pytest.mark.parametrize("spec, match", [
    ("gpucomm_train_factory_example:raising_factory", "raised RuntimeError: no weights here"),
    ("gpucomm_train_factory_example:wrong_factory", r"must return \(model, batch_fn, loss_fn\)"),
    ("gpucomm_train_factory_example:not_a_module_factory", "must be a torch.nn.Module"),
    ("gpucomm_train_factory_example:not_callable", "no callable 'not_callable'"),
    ("gpucomm_train_factory_example:missing", "no callable 'missing'"),
    ("no_such_module_xyz:factory", "cannot import module 'no_such_module_xyz'"),
    (":factory", "pkg.module:factory"),
])
def test_bad_factories(example_path, spec, match):
    with pytest.raises(ModelError, match=match):
        load_workload(spec)


def test_gpt_shapes_come_from_the_one_shape_table():
    from gpucomm import models as shapes

    for name in ("gpt-tiny", "gpt-124m", "gpt-350m"):
        arch = shapes.get(name)
        cfg = GPTConfig.from_architecture(arch)
        assert (cfg.n_layer, cfg.d_model, cfg.n_head, cfg.vocab, cfg.seq_len, cfg.ffn_hidden) == (
            arch.layers, arch.hidden, arch.heads, arch.vocab, arch.seq, arch.ffn_hidden)
    tiny = load_workload("gpt-tiny").build_model()
    assert sum(p.numel() for p in tiny.parameters()) == shapes.get("gpt-tiny").params()


def test_llama_shapes_are_refused_by_the_builtin_gpt():
    from gpucomm import models as shapes

    with pytest.raises(ValueError, match="GPT-2-style"):
        GPTConfig.from_architecture(shapes.get("llama2-7b"))
