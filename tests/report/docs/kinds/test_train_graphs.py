"""``train-graphs``: host, launch and GPU time per replica-step; a failed form says why."""

from __future__ import annotations

import json

from gpucomm.report.docs.kinds import KINDS


def test_rows_with_launch_over_gpu_and_a_failed_form(tmp_path):
    rows = [{"env": {"command": "python benchmarks/train_graphs.py"}},
            {"form": "single", "mode": "graphs", "status": "ok", "host_ms_per_replica": 0.6,
             "launch_ms_per_replica": 0.7, "gpu_ms_per_replica": 40.0, "host_ratio": 0.015, "losses_match": True},
            {"form": "replicated x2", "mode": "graphs", "status": "failed", "reason": "capture failed"}]
    path = tmp_path / "train-graphs_x_2026-12-03.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    lines = KINDS["train-graphs"].render(path, {}).splitlines()
    assert lines[2] == "| single | graphs | 0.600 | 0.700 | 40.00 | 0.0175 | 0.0150 | equal |"
    assert lines[3].startswith("| replicated x2 | graphs | — |") and "failed: capture failed" in lines[3]
