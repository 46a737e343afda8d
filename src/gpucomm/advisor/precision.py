"""Numerics of a training run: the dtype matrix math runs in, the dtype weights are stored in, the optimizer.

Two separate choices, each named once (HELPERS' precision names):

* ``compute`` (``--dtype``): ``bf16`` or ``fp16`` = 16-bit matrix math, ``fp32`` = none.  The peak FLOP/s a
  step is measured against.
* ``weights`` (``--weights``): how the parameters are stored.

  - ``fp32`` (the default): fp32 weights and gradients, the optimizer's state in fp32 beside them.  With
    16-bit compute this is ``torch.autocast`` over fp32 weights (what ``gpucomm train --precision bf16``
    does, and FSDP2's ``MixedPrecisionPolicy(param_dtype=bf16)``, which keeps its sharded parameters in
    fp32 and gathers them in bf16): 4 + 4 + 8 bytes per parameter with Adam.  The forward computes with
    16-bit copies of the weights (:mod:`gpucomm.advisor.memory`, "autocast copies").
  - ``bf16`` or ``fp16``: 16-bit weights and gradients with an fp32 master copy inside the
    optimizer, the mixed precision of ZeRO (Rajbhandari et al. SC'20, Sec. 3.1: 2 + 2 + 12 bytes per
    parameter with Adam), Megatron-LM and DeepSpeed.  No cast copies.

  The total with Adam is 16 bytes per parameter either way; what differs is what sharding divides (ZeRO-1
  shards 8 bytes of fp32 Adam state but 12 of master + state) and what a gradient collective moves (4 or 2
  bytes per parameter).

The optimizer: ``adam`` (two fp32 moments, 8 bytes) or ``sgd`` with momentum (4 bytes); with 16-bit weights
the fp32 master copy adds 4 to either.  Nothing here imports torch.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["COMPUTE", "OPTIMIZERS", "WEIGHTS", "Precision", "PrecisionError", "from_record"]

COMPUTE = ("bf16", "fp16", "fp32")
WEIGHTS = ("fp32", "bf16", "fp16")
OPTIMIZERS = ("adam", "sgd")
_STATE = {"adam": 8, "sgd": 4}
"""fp32 optimizer state per parameter: Adam's two moments, SGD's momentum."""
_MASTER = 4
"""The fp32 master copy a 16-bit-weight optimizer keeps."""


class PrecisionError(ValueError):
    """A compute dtype, weight storage or optimizer that does not exist, or a combination that cannot run."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Precision:
    """Compute dtype, weight storage and optimizer (module docstring)."""

    compute: str = "bf16"
    weights: str = "fp32"
    optimizer: str = "adam"

    def __post_init__(self) -> None:
        if self.compute not in COMPUTE:
            raise PrecisionError(f"--dtype {self.compute!r}: expected one of {', '.join(COMPUTE)}")
        if self.weights not in WEIGHTS:
            raise PrecisionError(f"--weights {self.weights!r}: expected one of {', '.join(WEIGHTS)}")
        if self.optimizer not in OPTIMIZERS:
            raise PrecisionError(f"--optimizer {self.optimizer!r}: expected one of {', '.join(OPTIMIZERS)}")
        if self.compute == "fp32" and self.weights != "fp32":
            raise PrecisionError("--weights bf16 with --dtype fp32: 16-bit weights need 16-bit compute; "
                                 "use --dtype bf16, or --weights fp32")

    @property
    def weight_bytes(self) -> int:
        """Bytes per stored parameter."""
        return 4 if self.weights == "fp32" else 2

    @property
    def grad_bytes(self) -> int:
        """Bytes per gradient element, stored and reduced (gradients take the weights' dtype)."""
        return self.weight_bytes

    @property
    def optimizer_bytes(self) -> int:
        """Optimizer state per parameter: the fp32 moments, plus the fp32 master copy of 16-bit weights."""
        return _STATE[self.optimizer] + (_MASTER if self.weights != "fp32" else 0)

    @property
    def compute_bytes(self) -> int:
        """Bytes per element of what the forward computes with (activations, gathered 16-bit weights)."""
        return 4 if self.compute == "fp32" else 2

    @property
    def autocast(self) -> bool:
        """16-bit compute over fp32 weights: the forward works on 16-bit copies of the weights."""
        return self.compute != "fp32" and self.weights == "fp32"

    def label(self) -> str:
        if self.compute == "fp32":
            return f"fp32, {self.optimizer}"
        store = "fp32 weights (autocast)" if self.weights == "fp32" else f"{self.weights} weights + fp32 master"
        return f"{self.compute} compute over {store}, {self.optimizer}"


def from_record(precision: str, optimizer: str = "adam") -> Precision:
    """The numerics a ``gpucomm train`` record names ("bf16-autocast", "fp32")."""
    if precision == "bf16-autocast":
        return Precision(compute="bf16", weights="fp32", optimizer=optimizer)
    if precision == "fp32":
        return Precision(compute="fp32", weights="fp32", optimizer=optimizer)
    raise PrecisionError(f"record precision {precision!r}: expected 'bf16-autocast' or 'fp32'")
