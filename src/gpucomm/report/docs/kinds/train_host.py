"""``train-host``: gpucomm train directory: step, GPU and host time per strategy."""

from __future__ import annotations

from pathlib import Path

from gpucomm.report._format import fmt_float
from gpucomm.report.docs.kinds._tables import md_table
from gpucomm.report.docs.spec import Kind


def render(path: Path, options: dict[str, str]) -> str:
    """A ``gpucomm train`` result directory: per strategy, step and GPU time, host time per step and per device."""
    from gpucomm.records import load

    rows = []
    for r in load(path).train:
        equal = "—" if r.equal_to_single is None else ("yes" if r.equal_to_single else "NO")
        host_gpu = (f"{r.host_ms_per_device / r.gpu_ms_median:.3f}"
                    if r.host_ms_per_device is not None and r.gpu_ms_median else "—")
        rows.append([r.strategy, f"{r.devices[0]} × {len(r.devices)}" if len(r.devices) > 1 else r.devices[0],
                     fmt_float(r.step_ms_median, 1), fmt_float(r.gpu_ms_median, 1), fmt_float(r.host_ms_median, 1),
                     fmt_float(r.host_ms_per_device, 1), host_gpu, equal])
    return md_table(["strategy", "devices", "step median (ms)", "GPU (ms)", "host (ms)", "host per device (ms)",
                     "host per device / GPU", "equal to single"],
                    rows, [False, False, True, True, True, True, True, False])


KIND = Kind("train-host", "gpucomm train directory: step, GPU and host time per strategy", render)
