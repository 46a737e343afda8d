"""GPU runs of ``gpucomm bench`` (skipped without CUDA): repeated cuda:0 slots and world size 1 suffice."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from gpucomm import records
from gpucomm.testing.markers import requires_gpus


def _bench(out, *flags: str) -> tuple[int, str, list[dict]]:
    done = subprocess.run([sys.executable, "-m", "gpucomm", "bench", "--devices", "0,0,0,0", "--nproc", "1",
                           "--out", str(out), *flags], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "COLUMNS": "200"})
    text = done.stdout + done.stderr
    rows = []
    for line in (out / records.RECORDS_FILE).read_text().splitlines()[1:]:
        row = json.loads(line)
        records.validate_row(row)
        rows.append(row)
    return done.returncode, text, rows


@requires_gpus(1)
def test_tiny_cuda_run_with_events(tmp_path):
    rc, text, rows = _bench(tmp_path / "run", "-b", "1K", "-e", "64K", "-f", "64", "-n", "5", "-w", "2")
    assert rc == 0, text
    assert {r["backend"] for r in rows} == {"torch.cuda.comm", "gpucomm.comm", "torch.distributed", "gpucomm.dist"}
    assert all(r["timing"] == "cuda-events" and r["device_type"] == "cuda" for r in rows)
    assert all(r["wrong"] == 0 for r in rows), [r for r in rows if r["wrong"]]
    assert {r["op"] for r in rows if r["backend"] == "torch.cuda.comm"} == {"broadcast", "reduce", "scatter", "gather"}
    ours = [r for r in rows if r["backend"] == "gpucomm.comm" and r["op"] in ("broadcast", "scatter", "gather")]
    assert ours and all(r["baseline"] == "torch.cuda.comm" and r["speedup"] > 0 for r in ours)
    assert {r["world_size"] for r in rows if r["backend"] in ("torch.distributed", "gpucomm.dist")} == {1}
    assert all(r["time_us_median"] > 0 and r["time_us_p99"] >= r["time_us_median"] for r in rows)
    assert (tmp_path / "run" / "report.md").exists()
    forms = {r["form"] for r in rows if r["backend"] == "gpucomm.comm"}
    assert "plain" in forms and forms <= {"plain", "prepared", "graph"}
    assert all("plain call" in r["note"] for r in rows if r["form"] != "plain")


@requires_gpus(1)
def test_cuda_graph_rows_are_labelled_and_checked(tmp_path):
    rc, text, rows = _bench(tmp_path / "run", "--cuda-graph", "--ops", "all_reduce,broadcast", "-b", "4K", "-e", "4K",
                            "-n", "5", "-w", "2")
    assert rc == 0, text
    assert rows or "capture failed" in text, text
    assert all(r["timing"] == "cuda-graph" for r in rows)
    assert all(r["wrong"] == 0 for r in rows), [r for r in rows if r["wrong"]]
