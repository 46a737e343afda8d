"""``train-graphs``: benchmarks/train_graphs.py .jsonl: host, launch, GPU per replica-step."""

from __future__ import annotations

from pathlib import Path

from gpucomm.report._format import fmt_float
from gpucomm.report.docs.kinds._tables import jsonl, md_table
from gpucomm.report.docs.spec import Kind


def render(path: Path, options: dict[str, str]) -> str:
    """``benchmarks/train_graphs.py`` .jsonl: per form and mode, host, launch and GPU time per replica-step."""
    rows = []
    for r in jsonl(path):
        if "form" not in r:
            continue
        if r.get("status") != "ok":
            rows.append([r["form"], r["mode"], *(["—"] * 5), f"{r['status']}: {r.get('reason', '')}"])
            continue
        launch = r.get("launch_ms_per_replica")
        gpu = r.get("gpu_ms_per_replica")
        rows.append([r["form"], r["mode"], fmt_float(r["host_ms_per_replica"], 3),
                     "—" if launch is None else fmt_float(launch, 3), "—" if gpu is None else fmt_float(gpu, 2),
                     "—" if launch is None or not gpu else f"{launch / gpu:.4f}",
                     "—" if r.get("host_ratio") is None else f"{r['host_ratio']:.4f}",
                     "equal" if r.get("losses_match") else "DIFFER"])
    return md_table(["form", "mode", "host (ms)", "launch (ms)", "GPU (ms)", "launch / GPU", "host / GPU", "losses"],
                    rows, [False, False, True, True, True, True, True, False])


KIND = Kind("train-graphs", "benchmarks/train_graphs.py .jsonl: host, launch, GPU per replica-step", render)
