"""What is trained: parameter count, shape, precision, optimizer, batch — the advisor's workload.

Built-in models have the shapes of ``gpucomm.train.models`` (nanoGPT-style GPT with tied head, and a
4-layer MLP), and their parameter counts come from the architecture formulas below, so the advisor does
not import torch to plan:

* GPT (tied output head): ``V d + T d + L (12 d^2 + 13 d) + 2 d`` — per block: two LayerNorms ``4d``,
  qkv ``3d^2 + 3d``, attention projection ``d^2 + d``, MLP ``4d^2 + 4d`` and ``4d^2 + d``.
* MLP: ``sum(in*out + out)`` over its Linear layers.

``tests/advisor/test_workload.py`` checks these against the real modules when ``gpucomm.train`` exists.
``--layers L --d-model D`` describes a GPT of the same family at another size (vocabulary 50304).
A model given as a number (``--params 7e9``) has no shape: no activation estimate unless
``--layers/--d-model`` are given, and compute comes from 6 Psi per token (or per sample).
"""

from __future__ import annotations

from dataclasses import dataclass

from gpucomm import models
from gpucomm.advisor.cost import PRECISIONS, Precision
from gpucomm.advisor.memory import activation_bytes_per_layer

__all__ = ["MODEL_SHAPES", "ModelShape", "Workload", "WorkloadError", "builtin_shape", "custom_gpt", "gpt_params",
           "make_workload", "mlp_params"]


class WorkloadError(ValueError):
    """An unknown model, precision or optimizer, or a batch that cannot be split."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ModelShape:
    """Architecture numbers the formulas need."""

    family: str
    """"gpt" or "mlp"."""
    layers: int
    d_model: int
    vocab: int = 0
    seq_len: int | None = None
    """Default sequence length (None for non-sequence models)."""
    d_in: int = 0
    classes: int = 0


MODEL_SHAPES: dict[str, ModelShape] = {
    **{name: ModelShape(family="gpt", layers=a.layers, d_model=a.hidden, vocab=a.vocab, seq_len=a.seq)
       for name, a in models.ARCHITECTURES.items() if name in ("gpt-tiny", "gpt-124m", "gpt-350m")},
    "mlp": ModelShape(family="mlp", layers=4, d_model=256, d_in=256, classes=16),
}
"""The named-strategy models: the GPTs from the one shape table (:mod:`gpucomm.models`) and the MLP of
``gpucomm.train.models`` (kept equal by a test)."""


def gpt_params(layers: int, d_model: int, vocab: int, seq_len: int) -> int:
    """Parameters of a GPT with a tied head: ``V d + T d + L (12 d^2 + 13 d) + 2 d``."""
    d = d_model
    return vocab * d + seq_len * d + layers * (12 * d * d + 13 * d) + 2 * d


def mlp_params(d_in: int, hidden: int, depth: int, classes: int) -> int:
    """Parameters of ``depth`` Linear layers of width ``hidden`` plus a classifier head."""
    return d_in * hidden + hidden + (depth - 1) * (hidden * hidden + hidden) + hidden * classes + classes


def builtin_shape(name: str) -> ModelShape | None:
    """The shape of a built-in model, or None."""
    return MODEL_SHAPES.get(name)


@dataclass(frozen=True, kw_only=True, slots=True)
class Workload:
    """One training job to plan for."""

    model: str
    params: int
    """Psi."""
    precision: Precision
    optimizer: str
    """"adam" or "sgd" (with momentum)."""
    global_batch: int
    seq_len: int | None
    shape: ModelShape | None = None

    @property
    def tokens_per_sample(self) -> int:
        """Tokens in one sample (1 for non-sequence models: 6 Psi FLOPs per sample)."""
        return self.seq_len or 1

    @property
    def layers(self) -> int:
        """Units a sharded strategy gathers one at a time (1 when the shape is unknown)."""
        return self.shape.layers if self.shape else 1

    def units(self) -> list[int]:
        """Parameter counts of the units a sharded strategy gathers one at a time, in forward order.

        GPT: the embeddings (token + position, tied head) then each block (FSDP's usual per-block
        wrapping); MLP: each Linear; unknown shape: the whole model as one unit (nothing overlaps).
        """
        s = self.shape
        if s is None:
            return [self.params]
        if s.family == "gpt":
            d = s.d_model
            block = 12 * d * d + 13 * d
            blocks = [block] * s.layers
            return [self.params - sum(blocks), *blocks]
        widths = [s.d_in] + [s.d_model] * s.layers + [s.classes]
        return [a * b + b for a, b in zip(widths[:-1], widths[1:], strict=True)]

    def activation_bytes(self, per_device_batch: float) -> float:
        """Activation memory for ``per_device_batch`` samples (0 when the shape is unknown)."""
        s = self.shape
        if s is None:
            return 0.0
        if s.family == "gpt":
            # Korthikanti's 34 s b h per layer from the planner's formula (no recomputation, flash attention:
            # no stored scores, so the head count is not needed), plus 8 s b V for fp32 logits and their
            # gradient (memory.py's logits term counts bf16 ones, 4 s b V, so it is not shared).
            seq = self.seq_len or s.seq_len or 1
            per_layer = activation_bytes_per_layer(seq, per_device_batch, s.d_model, 1, 1, "none", flash=True)
            return s.layers * per_layer + 8 * seq * per_device_batch * s.vocab
        # MLP: each layer keeps its input and its pre-activation, fp32.
        return 4 * per_device_batch * (s.d_in + 2 * s.layers * s.d_model + s.classes)


def _count(name: str, shape: ModelShape, seq_len: int | None) -> int:
    if shape.family == "gpt":
        # The position table spans the model's context length, whatever --seq-len a step uses.
        return gpt_params(shape.layers, shape.d_model, shape.vocab, max(shape.seq_len or 0, seq_len or 0))
    return mlp_params(shape.d_in, shape.d_model, shape.layers, shape.classes)


def custom_gpt(layers: int, d_model: int, vocab: int = 50304, seq_len: int = 1024) -> tuple[str, ModelShape]:
    """A GPT of the built-in family with a given depth and width: its name and shape."""
    for name, v in (("--layers", layers), ("--d-model", d_model), ("--vocab", vocab), ("--seq-len", seq_len)):
        if not isinstance(v, int) or v < 1:
            raise WorkloadError(f"{name}: expected an integer >= 1, but got {v!r}")
    return f"gpt-L{layers}-d{d_model}", ModelShape(family="gpt", layers=layers, d_model=d_model, vocab=vocab,
                                                   seq_len=seq_len)


def make_workload(model: str | None, *, params: int | None = None, dtype: str = "bf16",
                  optimizer: str = "adam", global_batch: int = 256, seq_len: int | None = None,
                  shape: ModelShape | None = None) -> Workload:
    """Build a :class:`Workload` from a built-in name, a custom GPT ``shape`` or a parameter count.

    Raises:
        WorkloadError: unknown model/dtype/optimizer, or neither model nor params given.
    """
    if dtype not in PRECISIONS:
        raise WorkloadError(f"--dtype {dtype!r}: expected one of {', '.join(PRECISIONS)}")
    opt = str(optimizer).lower()
    if opt not in ("adam", "sgd"):
        raise WorkloadError(f"--optimizer {optimizer!r}: expected 'adam' or 'sgd'")
    if not isinstance(global_batch, int) or global_batch < 1:
        raise WorkloadError(f"--global-batch: expected an integer >= 1, but got {global_batch!r}")
    if shape is None:
        shape = builtin_shape(model) if model else None
    if model and shape is None and params is None:
        raise WorkloadError(f"--model {model!r} is not a built-in model; valid names are: "
                            f"{', '.join(MODEL_SHAPES)} — or give --params N")
    if shape is None and params is None:
        raise WorkloadError("give --model NAME or --params N")
    if shape is not None and shape.family == "gpt" and seq_len is None:
        seq_len = shape.seq_len
    count = int(params) if params is not None else _count(model, shape, seq_len)
    if count < 1:
        raise WorkloadError(f"--params: expected >= 1, but got {params!r}")
    return Workload(model=model or f"{count} params", params=count, precision=PRECISIONS[dtype],
                    optimizer=opt, global_batch=global_batch, seq_len=seq_len, shape=shape)
