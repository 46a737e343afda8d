"""What a compute source answers: one micro-batch's compute on one GPU, by part, and an optimizer step.

Both compute sources (:mod:`~gpucomm.advisor.compute.datasheet` and a measured
:mod:`~gpucomm.advisor.compute.profile`) answer in these types, and :mod:`gpucomm.advisor.timing` assembles a
step from them (stages, bubble, overlapped communication).  Nothing here imports torch.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ComputeParts", "Lookup"]


@dataclass(frozen=True, kw_only=True, slots=True)
class Lookup:
    """One number a compute source looked up (seconds, or bytes where the question is memory), and how far
    from what it saw.

    ``extrapolated`` is empty when the number is a measured point, an interpolation between measured points,
    or a datasheet formula (which holds everywhere it holds); otherwise one line per coordinate that lay
    outside the measured grid (``"tokens 262144 above the largest measured 131072"``).
    """

    value: float
    extrapolated: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True, slots=True)
class ComputeParts:
    """One micro-batch on one GPU, as a step is assembled from it (seconds)."""

    t_mb: float
    """Forward + backward (+ recomputation) of ``per_stage`` layers and of the head with its loss."""
    t_head: float
    """The head and the loss, inside ``t_mb`` (the last pipeline stage runs them)."""
    gemm_fwd_s: float
    """One layer's forward GEMMs: what overlapped tensor-parallel communication can hide behind."""
    attn_fwd_s: float
    """One layer's attention forward: what context-parallel communication hides behind."""
    per_stage: int
    """Layers ``t_mb`` counts."""
    fixed_s: float | None = None
    """A measured per-step cost (optimizer and per-step host work) replacing the optimizer estimate; None:
    the compute source's optimizer step (:meth:`ComputeSource.optimizer_s`)."""
    loss_s: float = 0.0
    """The loss alone, per micro-batch (DataParallel runs it on device 0 for every replica)."""
    efficiency: float = 0.0
    """The GEMM efficiency used (fraction of peak; 0 for measured compute)."""
    t_embedding: float = 0.0
    """The embedding's forward + backward, inside ``t_mb`` (the first pipeline stage runs it; 0 where the
    source does not price it separately: the datasheet model counts no embedding time)."""
    extrapolated: tuple[str, ...] = ()
    """Lines naming what was looked up outside a measured profile's grid (:class:`Lookup`); empty otherwise."""
    host_layer_s: float = 0.0
    """The host's time to issue one layer's forward and backward (eager PyTorch: Python, dispatch, launches;
    0 where unknown).  The host runs ahead of the device, so a step takes the longer of the device's work and
    the host's (:func:`gpucomm.advisor.timing.step_time`, **Host**)."""
