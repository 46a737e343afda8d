"""Built-in workloads (a GPT-style decoder and an MLP) and loading the user's own (``pkg.module:factory``).

A :class:`Workload` is everything a strategy needs and nothing it may change: how to build the model
(deterministically from the seed), how to make step ``s``'s global batch, and how to turn outputs into
the loss.  Every strategy receives the same workload, so a comparison swaps only the strategy.

Built-in models (``MODELS``): the GPT shapes named in :data:`gpucomm.train.defaults.BUILTIN_GPTS`,
read from the one model-shape table :mod:`gpucomm.models` (``gpt-tiny``: 2 layers of 64, for CPU
tests; ``gpt-124m`` and ``gpt-350m``: GPT-2 small and medium), and ``mlp``, a 4-layer MLP classifier
(about 0.3 M parameters).  Only GPT-2-style shapes (LayerNorm, biases, learned positions, a 4h GELU
MLP, tied head) can be built here; the table's Llama shapes are for the advisor.

The GPT is nanoGPT's (Karpathy's ``model.py`` with its GPT-2 defaults), so that a step of the built-in
model costs what a step of the GPT people train and compare with costs: learned positions, pre-LayerNorm
blocks (LayerNorm with bias, eps 1e-5), one fused q/k/v projection, causal attention through
``torch.nn.functional.scaled_dot_product_attention(is_causal=True)``, a 4× MLP with the exact (erf) GELU,
biases in every Linear but the head, the head tied to the token embedding, GPT-2's initialisation
(N(0, 0.02); residual projections N(0, 0.02/√(2·layers))), vocabulary 50304, and no dropout (nanoGPT's
pre-training default, and dropout would make strategies draw different random masks).

The loss is nanoGPT's too: ``F.cross_entropy`` on the logits as the head returns them.  Under bf16
autocast that runs log-softmax in bf16 (``cross_entropy`` passes its input's dtype to ``log_softmax``,
and autocast keeps a dtype that is given) and the NLL in fp32; the start of backward then holds about
10 bytes per logit.  Upcasting the logits first (``logits.float()``, as torchtitan and Megatron do) keeps
the log-softmax output and two gradients in fp32, 12 bytes per logit — at 16 × 1024 tokens × 50304 that
is 1.5 GiB more — and adds fp32 passes over the logits.  ``benchmarks/gpt_vs_nanogpt.py`` measures this
model's step against a nanoGPT-style loop side by side.

A user factory (``--model pkg.module:factory``) is called with no arguments under
``torch.manual_seed(seed)`` and returns ``(model, batch_fn, loss_fn)``:

* ``model``: a ``torch.nn.Module`` on the CPU; ``model(*inputs)`` (or ``model(inputs)`` for one tensor);
* ``batch_fn(seed, step, global_batch) -> (inputs, targets)``: tensors (or tuples of tensors) whose dim 0
  is the sample dimension, of size ``global_batch``; it must depend only on its arguments;
* ``loss_fn(outputs, targets) -> scalar``: the **mean** over the samples it is given, so that the mean of
  equal shards' losses is the loss of the whole batch.
"""

from __future__ import annotations

import copy
import importlib
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from gpucomm import models as shapes
from gpucomm.train.defaults import BUILTIN_GPTS

__all__ = [
    "GPT",
    "MLP",
    "MODELS",
    "GPTConfig",
    "ModelError",
    "Workload",
    "gpt_batch",
    "load_workload",
    "model_names",
]

BatchFn = Callable[[int, int, int], tuple[Any, Any]]
LossFn = Callable[[Any, Any], torch.Tensor]


class ModelError(ValueError):
    """A model name that is unknown, or a user factory that failed or returned the wrong thing."""


@dataclass(frozen=True, kw_only=True, slots=True)
class GPTConfig:
    """The shape of a GPT-style decoder."""

    n_layer: int
    """Transformer blocks."""
    d_model: int
    """Embedding (residual stream) width."""
    n_head: int
    """Attention heads; must divide ``d_model``."""
    vocab: int
    """Vocabulary size (50304 = GPT-2's 50257 padded to a multiple of 64)."""
    seq_len: int
    """Context length: the largest sequence the position embedding covers."""
    ffn_hidden: int = 0
    """MLP inner width (0: ``4 * d_model``, GPT-2's)."""

    @classmethod
    def from_architecture(cls, arch: shapes.Architecture, seq_len: int | None = None) -> GPTConfig:
        """The GPT of a :mod:`gpucomm.models` shape; ``seq_len`` overrides its context length.

        Raises:
            ValueError: the shape is not GPT-2 style (this GPT has no SwiGLU, RMSNorm or rotary positions).
        """
        if not (arch.ffn_kind == "gelu-4h" and arch.learned_positions and arch.biases and arch.tied_embeddings
                and arch.kv_heads == arch.heads):
            raise ValueError(f"model {arch.name!r}: the built-in GPT builds only GPT-2-style shapes (GELU MLP, "
                             f"learned positions, biases, tied head, no GQA); write a factory for it")
        return cls(n_layer=arch.layers, d_model=arch.hidden, n_head=arch.heads, vocab=arch.vocab,
                   seq_len=arch.seq if seq_len is None else seq_len, ffn_hidden=arch.ffn_hidden)

    def __post_init__(self) -> None:
        if not self.ffn_hidden:
            object.__setattr__(self, "ffn_hidden", 4 * self.d_model)
        for name in ("n_layer", "d_model", "n_head", "vocab", "seq_len", "ffn_hidden"):
            if getattr(self, name) < 1:
                raise ValueError(f"GPTConfig.{name}: expected >= 1, but got {getattr(self, name)}")
        if self.d_model % self.n_head:
            raise ValueError(f"GPTConfig: n_head {self.n_head} must divide d_model {self.d_model}")


class _Block(nn.Module):
    """Pre-LayerNorm transformer block: x + attn(ln(x)), then x + mlp(ln(x)) with the exact GELU."""

    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        d = cfg.d_model
        self.n_head = cfg.n_head
        self.ln_1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.attn_proj = nn.Linear(d, d)
        self.ln_2 = nn.LayerNorm(d)
        self.fc = nn.Linear(d, cfg.ffn_hidden)
        self.mlp_proj = nn.Linear(cfg.ffn_hidden, d)

    def _attention(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=2)
        q, k, v = (z.view(b, t, self.n_head, d // self.n_head).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.attn_proj(y.transpose(1, 2).contiguous().view(b, t, d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self._attention(self.ln_1(x))
        return x + self.mlp_proj(F.gelu(self.fc(self.ln_2(x))))


class GPT(nn.Module):
    """A GPT-2-style decoder: ``forward(idx [B, T] int64) -> logits [B, T, vocab]``."""

    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.wte = nn.Embedding(cfg.vocab, cfg.d_model)
        self.wpe = nn.Embedding(cfg.seq_len, cfg.d_model)
        self.blocks = nn.ModuleList(_Block(cfg) for _ in range(cfg.n_layer))
        self.ln_f = nn.LayerNorm(cfg.d_model)
        self.lm_head = nn.Linear(cfg.d_model, cfg.vocab, bias=False)
        self.lm_head.weight = self.wte.weight  # tied, as in GPT-2
        self._init_weights()

    def _init_weights(self) -> None:
        # GPT-2: weights N(0, 0.02), residual projections N(0, 0.02 / sqrt(2 * n_layer)), biases 0;
        # LayerNorms keep their (1, 0) defaults.
        residual_std = 0.02 / math.sqrt(2 * self.cfg.n_layer)
        for name, module in self.named_modules():
            if isinstance(module, nn.Linear | nn.Embedding) and module is not self.lm_head:
                std = residual_std if name.endswith("proj") else 0.02
                nn.init.normal_(module.weight, mean=0.0, std=std)
                if getattr(module, "bias", None) is not None:
                    nn.init.zeros_(module.bias)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        t = idx.shape[1]
        if t > self.cfg.seq_len:
            raise ValueError(f"GPT.forward: sequence length {t} exceeds the model's seq_len {self.cfg.seq_len}")
        pos = torch.arange(t, device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.blocks:
            x = block(x)
        return self.lm_head(self.ln_f(x))


class MLP(nn.Module):
    """``depth`` Linear+GELU layers of width ``hidden``, then a classifier head."""

    def __init__(self, d_in: int = 256, hidden: int = 256, depth: int = 4, classes: int = 16) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        width = d_in
        for _ in range(depth):
            layers += [nn.Linear(width, hidden), nn.GELU()]
            width = hidden
        layers.append(nn.Linear(width, classes))
        self.net = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


@dataclass(frozen=True, kw_only=True, slots=True)
class Workload:
    """A model, its data and its loss: what every strategy trains, identically.

    ``build_model()`` returns a fresh CPU copy of the *same* initial weights on every call.
    """

    name: str
    """Built-in model name or ``pkg.module:factory``."""
    build_model: Callable[[], nn.Module]
    """A fresh CPU model with the workload's initial weights."""
    batch_fn: BatchFn
    """``(seed, step, global_batch) -> (inputs, targets)`` on the CPU, dim 0 = samples."""
    loss_fn: LossFn
    """``(outputs, targets) -> scalar``: the mean over the samples given."""
    seq_len: int | None = None
    """Tokens per sample, for tokens/s (None for non-sequence models)."""
    autocast: bool = True
    """Whether to run forward under bf16 autocast on CUDA (never on CPU)."""


def _generator(seed: int, step: int) -> torch.Generator:
    # One generator per (seed, step): any strategy, process or order of calls sees the same batch.
    return torch.Generator().manual_seed(seed * 1_000_003 + step)


def gpt_batch(vocab: int, seq_len: int) -> BatchFn:
    """Synthetic, learnable token sequences: ``x_t = (start + t * stride) mod vocab``, per sample.

    Each sample draws its own start and stride from ``(seed, step)``; the model can learn to continue
    an arithmetic progression, so the loss falls (random tokens would keep it flat at ln(vocab)).
    """

    def batch_fn(seed: int, step: int, global_batch: int) -> tuple[torch.Tensor, torch.Tensor]:
        g = _generator(seed, step)
        start = torch.randint(0, vocab, (global_batch, 1), generator=g)
        stride = torch.randint(1, 8, (global_batch, 1), generator=g)
        tokens = (start + stride * torch.arange(seq_len + 1)) % vocab
        return tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()

    return batch_fn


def _lm_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """nanoGPT's loss: cross-entropy on the logits in the dtype they come in (see the module docstring)."""
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def _mlp_batch(d_in: int, classes: int) -> BatchFn:
    teacher = torch.randn(d_in, classes, generator=torch.Generator().manual_seed(12345))

    def batch_fn(seed: int, step: int, global_batch: int) -> tuple[torch.Tensor, torch.Tensor]:
        x = torch.randn(global_batch, d_in, generator=_generator(seed, step))
        return x, (x @ teacher).argmax(dim=1)

    return batch_fn


def _mlp_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits.float(), targets)


MODELS: tuple[str, ...] = (*BUILTIN_GPTS, "mlp")
"""Built-in model names."""


def model_names() -> list[str]:
    """Built-in model names, for help texts and error messages."""
    return list(MODELS)


def _seeded(seed: int, make: Callable[[], nn.Module]) -> Callable[[], nn.Module]:
    state: dict[str, nn.Module] = {}

    def build() -> nn.Module:
        if "model" not in state:  # build once, hand out copies: every call gets the same weights
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(seed)
                state["model"] = make()
        return copy.deepcopy(state["model"])

    return build


def _builtin(name: str, seed: int, seq_len: int | None) -> Workload:
    if name == "mlp":
        if seq_len is not None:
            raise ModelError(f"--seq-len: the model 'mlp' has no sequence dimension, but got seq_len={seq_len}; "
                             f"leave --seq-len out for mlp")
        return Workload(name=name, build_model=_seeded(seed, MLP), batch_fn=_mlp_batch(256, 16),
                        loss_fn=_mlp_loss, seq_len=None)
    if seq_len is not None and seq_len < 1:
        raise ModelError(f"--seq-len: expected >= 1, but got {seq_len}")
    shape = GPTConfig.from_architecture(shapes.get(name), seq_len)
    return Workload(name=name, build_model=_seeded(seed, lambda: GPT(shape)),
                    batch_fn=gpt_batch(shape.vocab, shape.seq_len), loss_fn=_lm_loss, seq_len=shape.seq_len)


def _import_factory(spec: str) -> Callable[[], Any]:
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise ModelError(f"--model {spec!r}: expected a built-in name ({', '.join(MODELS)}) or "
                         f"'pkg.module:factory'")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ModelError(f"--model {spec!r}: cannot import module {module_name!r} ({exc}); "
                         f"is it on PYTHONPATH?") from exc
    factory = getattr(module, attr, None)
    if not callable(factory):
        raise ModelError(f"--model {spec!r}: module {module_name!r} has no callable {attr!r}")
    return factory


def _check_factory_result(spec: str, result: Any) -> tuple[nn.Module, BatchFn, LossFn]:
    if not isinstance(result, tuple | list) or len(result) != 3:
        raise ModelError(f"--model {spec!r}: the factory must return (model, batch_fn, loss_fn), but it "
                         f"returned {type(result).__name__} {result!r:.80}")
    model, batch_fn, loss_fn = result
    if not isinstance(model, nn.Module):
        raise ModelError(f"--model {spec!r}: the factory's first value must be a torch.nn.Module, but got "
                         f"{type(model).__name__}")
    for what, fn in (("batch_fn", batch_fn), ("loss_fn", loss_fn)):
        if not callable(fn):
            raise ModelError(f"--model {spec!r}: the factory's {what} must be callable, but got "
                             f"{type(fn).__name__}")
    return model, batch_fn, loss_fn


def _user(spec: str, seed: int, seq_len: int | None) -> Workload:
    factory = _import_factory(spec)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        try:
            result = factory()
        except Exception as exc:
            raise ModelError(f"--model {spec!r}: the factory raised {type(exc).__name__}: {exc}") from exc
    model, batch_fn, loss_fn = _check_factory_result(spec, result)
    model = model.cpu()
    return Workload(name=spec, build_model=lambda: copy.deepcopy(model), batch_fn=batch_fn,
                    loss_fn=loss_fn, seq_len=seq_len)


def load_workload(name: str, *, seed: int = 0, seq_len: int | None = None) -> Workload:
    """The workload called ``name``: a built-in (:data:`MODELS`) or ``pkg.module:factory``.

    Args:
        name: model name.
        seed: seed for the initial weights (data seeds are passed to ``batch_fn`` per step).
        seq_len: override the built-in GPT's context length; for a user factory, only recorded
            (tokens/s = samples/s × seq_len).

    Raises:
        ModelError: unknown name, or a factory that cannot be imported, raises or returns the wrong thing.
    """
    if not isinstance(name, str):
        raise TypeError(f"model: expected a str, but got {type(name).__name__} {name!r}")
    if name in MODELS:
        return _builtin(name, seed, seq_len)
    if ":" not in name:
        raise ModelError(f"--model {name!r} is not a built-in model; valid names are: {', '.join(MODELS)}, "
                         f"or 'pkg.module:factory' for your own")
    return _user(name, seed, seq_len)
