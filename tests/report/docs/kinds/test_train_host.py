"""``train-host``: step, GPU and host time per strategy, from a committed H200 train run."""

from __future__ import annotations

from pathlib import Path

from gpucomm.report.docs.kinds import KINDS

ROOT = Path(__file__).resolve().parents[4]


def test_reads_the_committed_h200_run():
    text = KINDS["train-host"].render(ROOT / "benchmarks/results/train-host-r2_h200x1_2026-12-03", {})
    dp = next(line for line in text.splitlines() if line.startswith("| dp |"))
    assert dp == "| dp | cuda:0 × 2 | 137.3 | 137.3 | 140.6 | 70.3 | 0.512 | yes |"
