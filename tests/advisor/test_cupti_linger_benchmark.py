"""benchmarks/cupti_linger.py: bad input is one line and exit 2, nothing written (the measurement itself needs
the shipped profile's GPU)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
import torch

_ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("cupti_linger", _ROOT / "benchmarks" / "cupti_linger.py")
linger = importlib.util.module_from_spec(_spec)
sys.modules["cupti_linger"] = linger
_spec.loader.exec_module(linger)


def test_bad_counts_are_one_line_and_exit_2(tmp_path, capsys):
    out = tmp_path / "r.txt"
    assert linger.main(["--rounds", "0", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "cupti_linger: error: --rounds/--repeats: expected counts >= 1, but got 0/3"
    assert not out.exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason="the refusal without the profile's GPU")
def test_without_the_profiles_gpu_it_refuses_and_writes_nothing(tmp_path, capsys):
    out = tmp_path / "r.txt"
    assert linger.main(["--out", str(out)]) == 2
    assert "needs a GPU of the profile shipped for --hardware h200-nvswitch" in capsys.readouterr().err
    assert not out.exists()
