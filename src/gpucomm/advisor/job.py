"""What is trained, on what, with which software: the fixed part of every layout's evaluation.

A :class:`Job` is read by :mod:`~gpucomm.advisor.memory`, :mod:`~gpucomm.advisor.timing` and
:mod:`~gpucomm.advisor.search`; a :class:`~gpucomm.advisor.layout.Layout` is the part the search varies.

Software keys, each with its default (the CLI states them in every answer):

* ``kernels`` (``--kernels``): ``fused`` (default: flash attention, fused elementwise kernels, sequence
  parallel) or ``unfused`` (Megatron-LM 2019's stack; :func:`gpucomm.advisor.timing.unfused_layer_bytes`).
* ``loss`` (``--loss``): how the cross-entropy holds the logits (:mod:`gpucomm.advisor.memory`, **Loss**).
  ``upcast`` (default): ``F.cross_entropy`` on fp32 logits in a plain PyTorch loop that holds its 16-bit logits
  through backward (nanoGPT's ``logits, loss = model(X, Y)``); ``autocast``: the same loop with
  ``F.cross_entropy`` on the 16-bit logits under autocast (which runs ``log_softmax`` in fp32: the same memory,
  timed as measured); ``upcast-del``: the upcast loss in a loop that keeps no reference to its logits
  (torchtitan's ``cross_entropy_loss`` on ``pred.float()``, then ``del pred``; ``gpucomm train``, whose model
  returns the loss); ``fused``: a fused or chunked kernel that never holds an
  fp32 copy of the logits (flash-attn's ``CrossEntropyLoss``, LLM Foundry's default ``fused_crossentropy``;
  Megatron's vocab-parallel loss works on the logits in place).
* ``precision``: compute dtype, weight storage and optimizer (:mod:`gpucomm.advisor.precision`).
* ``software`` (``--software``): the stack a measured compute profile prices (:mod:`gpucomm.advisor.compute.profile`):
  ``eager`` (default: plain PyTorch, what ``gpucomm measure`` times), ``compiled`` (a profile measured under
  ``torch.compile``), ``fused`` (Megatron-Core / Transformer Engine kernels, derived from an eager profile).  The
  datasheet model is a fused-kernel model whatever this says.
* ``compute_profile`` (``--compute-profile``): a compute profile file measured by ``gpucomm measure``; None: the
  one shipped or derived for the hardware, else the datasheet (:func:`gpucomm.advisor.compute.source_for`).
* ``host`` (``--host``): whose host issues an eager step's kernels (a host-paced step's time is the host's,
  :mod:`gpucomm.advisor.timing`, **Host**).  ``profile`` (default): the host of the machine that measured the
  compute profile; ``this``: this machine's, read by timing the profile's own host-bound points on this
  machine's GPU of the same model and scaling the profile's host time by the ratio
  (:func:`gpucomm.advisor.compute.measure.host_ratios`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpucomm.advisor.hardware import HardwareProfile
from gpucomm.advisor.precision import Precision
from gpucomm.models import Architecture

__all__ = ["HOSTS", "KERNELS", "LOSSES", "SOFTWARE", "Job"]

KERNELS = ("fused", "unfused")
LOSSES = ("upcast", "autocast", "upcast-del", "fused")
SOFTWARE = ("eager", "compiled", "fused")
HOSTS = ("profile", "this")


@dataclass(frozen=True, kw_only=True, slots=True)
class Job:
    """One training job on one kind of machine (module docstring)."""

    arch: Architecture
    profile: HardwareProfile
    nodes: int
    gpus_per_node: int
    global_batch: int
    seq: int
    precision: Precision = field(default_factory=Precision)
    kernels: str = "fused"
    loss: str = "upcast"
    efficiency: float | None = None
    """A calibrated GEMM efficiency (None: the profile's or the documented default)."""
    colocated: int = 1
    """Participants sharing one physical device (a ``gpucomm train`` run with ``--devices cuda:0,cuda:0``):
    their memory adds up on it and their compute runs one after another."""
    software: str = "eager"
    compute_profile: str | None = None
    host: str = "profile"

    def __post_init__(self) -> None:
        if self.kernels not in KERNELS:
            raise ValueError(f"--kernels {self.kernels!r}: expected one of {'|'.join(KERNELS)}; e.g. "
                             f"--kernels unfused for a stack without flash attention")
        if self.loss not in LOSSES:
            raise ValueError(f"--loss {self.loss!r}: expected one of {'|'.join(LOSSES)}")
        if self.software not in SOFTWARE:
            raise ValueError(f"--software {self.software!r}: expected one of {'|'.join(SOFTWARE)}")
        if self.host not in HOSTS:
            raise ValueError(f"--host {self.host!r}: expected one of {'|'.join(HOSTS)}")

    @property
    def gpus(self) -> int:
        return self.nodes * self.gpus_per_node

    @property
    def dtype(self) -> str:
        """The dtype matrix math runs in (the peak it is measured against)."""
        return self.precision.compute
