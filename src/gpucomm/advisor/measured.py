"""Compute from whole training steps measured by ``gpucomm train``: the calibrated profile's compute source.

Calibration (:mod:`gpucomm.advisor.calibrate`, :func:`~gpucomm.advisor.calibrate.fit_compute`) keeps, per
model, the ``single`` strategy's measured step at each global batch it ran (one device, no wrapper): forward,
backward and optimizer of ``b`` sequences.  Here that becomes the compute of one micro-batch of a layout:

* the step at ``mb`` sequences, interpolated between the measured batches (proportional below the smallest,
  along the last segment above the largest: :func:`step_at`);
* split into a per-step fixed part — the intercept of the line through the measured points, at most the
  smallest step (optimizer and per-step host work) — and the per-micro-batch rest, so that gradient
  accumulation repeats only the rest;
* the head-and-loss share of it by FLOPs (``6 V h`` of the ``flops_per_token``), a layer's forward GEMMs a third
  of its matrix FLOPs' share, so that the step assembles as a datasheet one does
  (:class:`gpucomm.advisor.compute.parts.ComputeParts`).

It applies where the measurement does: the same model and sequence length, no tensor, pipeline or context
parallelism, and no recomputation other than full (which repeats the layers' forward: 4/3 of their time).
Elsewhere :func:`parts` returns None and the datasheet model prices the layout.  Measured steps on one GPU
reproduce themselves exactly: predicting ``single`` at a measured batch gives the measured time.
"""

from __future__ import annotations

from typing import Any

from gpucomm.advisor.compute.parts import ComputeParts
from gpucomm.advisor.job import Job
from gpucomm.advisor.layout import Layout

__all__ = ["model_fit", "parts", "step_at"]


def model_fit(job: Job) -> dict[str, Any] | None:
    """The calibrated single-step fit of ``job``'s model at its sequence length, or None."""
    compute = (job.profile.calibration or {}).get("compute") or {}
    fit = (compute.get("models") or {}).get(job.arch.name)
    if not fit or not fit.get("points") or (fit.get("seq_len") or job.seq) != job.seq:
        return None
    return fit


def step_at(fit: dict[str, Any], b: float) -> float:
    """The measured single-device step at ``b`` sequences (module docstring)."""
    pts = sorted(fit["points"])
    if b <= pts[0][0]:
        return pts[0][1] * b / pts[0][0]
    for (b0, s0), (b1, s1) in zip(pts[:-1], pts[1:], strict=True):
        if b <= b1:
            return s0 + (s1 - s0) * (b - b0) / (b1 - b0)
    if len(pts) >= 2:
        (b0, s0), (b1, s1) = pts[-2], pts[-1]
        return s1 + max(0.0, (s1 - s0) / (b1 - b0)) * (b - b1)
    return pts[0][1] * b / pts[0][0]


def parts(job: Job, layout: Layout) -> ComputeParts | None:
    """One micro-batch of ``layout`` from ``job``'s measured steps, or None where they do not apply."""
    fit = model_fit(job)
    if fit is None or layout.tp * layout.pp * layout.cp != 1 or layout.ac not in ("none", "full"):
        return None
    pts = sorted(fit["points"])
    fixed = min(max(0.0, fit.get("c0_s") or 0.0), pts[0][1]) if len(pts) >= 2 else 0.0
    t_mb = max(0.0, step_at(fit, layout.mb) - fixed)
    arch = job.arch
    total = arch.flops_per_token(job.seq)
    head_share = 6.0 * arch.vocab * arch.hidden / total
    t_head = t_mb * head_share
    t_layers = t_mb - t_head
    if layout.ac == "full":
        t_layers *= 4.0 / 3.0
    layer_mm = 6.0 * (arch.matmul_params() - arch.vocab * arch.hidden) / arch.layers
    layer_total = (total - 6.0 * arch.vocab * arch.hidden) / arch.layers
    per_layer = t_layers / arch.layers
    return ComputeParts(t_mb=t_layers + t_head, t_head=t_head, gemm_fwd_s=per_layer * layer_mm / layer_total / 3,
                        attn_fwd_s=per_layer * (1 - layer_mm / layer_total) / 3, per_stage=arch.layers,
                        fixed_s=fixed)
