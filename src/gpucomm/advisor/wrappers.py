"""What a data-parallel wrapper costs beyond its communication: host time per device and compute slowdown.

Each layout names its wrapper (:attr:`gpucomm.advisor.layout.Layout.wrap`): ``none``, ``ddp`` (one process per
GPU; the sharded wrappers too), ``replicated`` (gpucomm's one-process data parallel), ``dataparallel``
(``torch.nn.DataParallel``).  Their communication is priced in :mod:`gpucomm.advisor.timing`; what remains is

* a **host cost per device per step**: the one-process wrappers launch every replica's kernels from one Python
  process (DataParallel also replicates the module every step and runs a thread per replica under the GIL);
* a **compute slowdown**: communication kernels or other processes competing with compute.

Both are measured where ``gpucomm train`` records calibrate them (:mod:`gpucomm.advisor.calibrate`: a
least-squares fit of what the model leaves over of each wrapper's measured steps); the sharded wrappers take
ddp's (the same hooks and buckets, assumed).  Without records, the host costs are
:data:`DEFAULT_PER_DEVICE_S` — assumed, and every answer says so.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpucomm.advisor.hardware import HardwareProfile
from gpucomm.advisor.layout import Layout

__all__ = ["DEFAULT_PER_DEVICE_S", "STRATEGY_WRAPPER", "WrapperCost", "cost"]

DEFAULT_PER_DEVICE_S = {"dataparallel": 2.0e-3, "replicated": 0.2e-3}
"""Host cost per device per step when no train record measures it.  ASSUMED, not measured: DataParallel 2 ms
(replicating the module and a thread per replica under the GIL), replicated 0.2 ms (a thread per device,
persistent replicas).  ``gpucomm advise --calibrate`` replaces them."""
STRATEGY_WRAPPER = {"single": "none", "dp": "dataparallel", "replicated": "replicated", "ddp": "ddp"}
"""``gpucomm train`` strategy names -> wrappers (the records calibrate wrappers by these)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class WrapperCost:
    """Host seconds per device per step, a compute slowdown fraction, and where they come from."""

    per_device_s: float = 0.0
    slowdown: float = 0.0
    note: str = ""


def cost(profile: HardwareProfile, layout: Layout) -> WrapperCost:
    """The wrapper cost of ``layout`` on ``profile`` (module docstring)."""
    wrap = layout.wrap
    if wrap == "none":
        return WrapperCost()
    calib = profile.calibration or {}
    fitted, slow = calib.get("per_device_s", {}), calib.get("slowdown", {})
    source = wrap
    if source in fitted:
        return WrapperCost(per_device_s=fitted[source], slowdown=slow.get(source, 0.0),
                           note=f"{wrap} per-device cost and slowdown calibrated from train records")
    default = DEFAULT_PER_DEVICE_S.get(wrap, 0.0)
    note = "" if not default else (f"{wrap} host cost {default * 1e3:.1f} ms per device per step ASSUMED: no train "
                                   f"record calibrates it (gpucomm advise --calibrate DIR)")
    return WrapperCost(per_device_s=default, note=note)
