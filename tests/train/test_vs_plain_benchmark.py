"""benchmarks/train_vs_plain.py in CI size on CPU: every side, every round, the summary and the file.

Checks the output's form only (CPU timings on a shared machine say nothing about the harness).
"""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "train_vs_plain.py"


@pytest.mark.slow
def test_tiny_run_prints_every_block_and_both_ratios(tmp_path):
    out_file = tmp_path / "results" / "train-vs-plain_cpu_test.txt"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, str(SCRIPT), "--device", "cpu", "--model", "gpt-tiny", "--batch", "4",
                           "--steps", "2", "--warmup", "2", "--rounds", "2", "--out", str(out_file)],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    text = out_file.read_text()
    assert text == proc.stdout
    assert "# command: " in text and "--rounds 2" in text and "CPU numbers" in text
    rows = [line.split() for line in text.splitlines() if re.match(r"\s*\d+ (plain|single|ddp) ", line)]
    assert sorted((int(r[0]), r[1]) for r in rows) == [(rnd, s) for rnd in (0, 1) for s in ("ddp", "plain", "single")]
    assert all(float(r[2]) > 0 and r[6] == "n/a" for r in rows)  # mean_ms; memory n/a on CPU
    assert [r[1] for r in rows[:3]] != [r[1] for r in rows[3:]]  # the order rotates between rounds
    for side in ("single", "ddp"):
        assert re.search(rf"^{side}/plain time \d+\.\d{{3}}x \(rounds: [\d., ]+; target <= [\d.]+\)", text, re.M)


def test_bad_counts_are_one_line_exit_2():
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    proc = subprocess.run([sys.executable, str(SCRIPT), "--device", "cpu", "--rounds", "0"], capture_output=True,
                          text=True, env=env, timeout=120)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "--rounds" in proc.stderr
