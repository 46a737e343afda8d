"""examples/parallel_from_dataparallel.py runs, and its wrapper trains exactly as one device does."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_migration_example_equals_one_device():
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    proc = subprocess.run([sys.executable, str(ROOT / "examples" / "parallel_from_dataparallel.py")],
                          capture_output=True, text=True, env=env, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "losses equal to one device: True" in out
    assert "parameters equal to one device: True" in out
    assert "replicas bit-identical: True" in out
