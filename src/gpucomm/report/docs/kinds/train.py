"""``train``: gpucomm train directory: one row per strategy."""

from __future__ import annotations

from pathlib import Path

from gpucomm.report._format import fmt_float
from gpucomm.report.docs.kinds._tables import md_table
from gpucomm.report.docs.spec import Kind


def render(path: Path, options: dict[str, str]) -> str:
    """A ``gpucomm train`` result directory: one row per strategy."""
    from gpucomm.records import load

    rows = []
    for r in load(path).train:
        peak = f"{max(r.peak_mem_bytes) / (1 << 30):.2f}" if r.peak_mem_bytes else "—"
        equal = "—" if r.equal_to_single is None else ("yes" if r.equal_to_single else "NO")
        rows.append([r.strategy, ", ".join(dict.fromkeys(r.devices)) + (f" × {len(r.devices)}" if len(r.devices) > 1
                                                                          else ""),
                     fmt_float(r.samples_per_s, 1), fmt_float(r.tokens_per_s, 0),
                     f"{fmt_float(r.step_ms_median, 1)} / {fmt_float(r.step_ms_p90, 1)}", peak,
                     fmt_float(r.comm_ms_median), fmt_float(r.host_ms_per_device, 3), equal])
    return md_table(["strategy", "devices", "samples/s", "tokens/s", "step median / p90 (ms)", "peak memory (GiB)",
                     "all-reduce (ms)", "host ms per device", "equal to single"],
                    rows, [False, False, True, True, True, True, True, True, False])


KIND = Kind("train", "gpucomm train directory: one row per strategy", render)
