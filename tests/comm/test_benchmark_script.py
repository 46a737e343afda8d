"""benchmarks/comm_vs_torch.py: its helpers, and the clear exit without CUDA (the timing itself needs GPUs)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
import torch

from gpucomm.testing.markers import requires_gpus

_PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "comm_vs_torch.py"
_spec = importlib.util.spec_from_file_location("comm_vs_torch", _PATH)
bench = importlib.util.module_from_spec(_spec)
sys.modules["comm_vs_torch"] = bench  # dataclasses look their module up there
_spec.loader.exec_module(bench)


def test_sizes_and_units():
    assert bench.parse_size("64M") == 64 << 20 and bench.parse_size("1GiB") == 1 << 30
    assert bench.parse_size("4096") == 4096
    assert bench.sizes(8, 1 << 10, 4) == [8, 32, 128, 512, 1024]
    assert bench.sizes(8, 512, 4) == [8, 32, 128, 512]
    assert bench.human(3 << 20) == "3 MiB" and bench.human(8) == "8 B"
    assert bench.p99([float(i) for i in range(101)]) == 99.0


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only exit")
def test_exits_2_without_cuda(capsys):
    assert bench.main(["--max-bytes", "1K"]) == 2
    assert "CUDA is not available" in capsys.readouterr().err


@requires_gpus(1)
def test_tiny_run_on_one_gpu(tmp_path, capsys):
    path = tmp_path / "rows.jsonl"
    code = bench.main(["--devices", "cuda:0,cuda:0", "--max-bytes", "1K", "--iters", "4", "--warmup", "1",
                       "--json", str(path), "--out", str(tmp_path), "--date", "D"])
    assert code == 0
    rows = path.read_text().splitlines()
    assert len(rows) == len(bench.OPS) * len(bench.sizes(8, 1024, 4))
    assert '"correct": false' not in path.read_text()
    table = next(tmp_path.glob("comm-vs-torch_*x1_D.txt")).read_text()
    assert table.startswith("# command: python ") and table.count("\n") == len(rows) + 4
    assert len(next(tmp_path.glob("comm-vs-torch_*x1_D.jsonl")).read_text().splitlines()) == len(rows) + 1


def test_budget_stops_before_any_point_and_keeps_the_header(tmp_path):
    if not torch.cuda.is_available():
        pytest.skip("the sweep itself needs CUDA")
    assert bench.main(["--devices", "cuda:0,cuda:0", "--max-bytes", "1K", "--budget-s", "0",
                       "--out", str(tmp_path)]) == 0
    assert "stopped early (--budget-s reached)" in next(tmp_path.glob("*.txt")).read_text()
