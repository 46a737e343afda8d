"""benchmarks/host_adjacent.py: bad input is one line and exit 2, nothing written (the measurement itself needs
the shipped profile's GPU: benchmarks/results/host-adjacent_h200x1_*.txt)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
import torch

_ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("host_adjacent", _ROOT / "benchmarks" / "host_adjacent.py")
adjacent = importlib.util.module_from_spec(_spec)
sys.modules["host_adjacent"] = adjacent
_spec.loader.exec_module(adjacent)


@pytest.mark.parametrize("argv, said", [
    (["--cases", "no-such-case"], "--cases no-such-case: no such case; expected some of gpt-350m"),
    (["--rounds", "0"], "--rounds/--repeats: expected counts >= 1, but got 0/3"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, argv, said):
    out = tmp_path / "r.txt"
    assert adjacent.main([*argv, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("host_adjacent: error: ") and said in err and "\n" not in err
    assert not out.exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason="the refusal without the profile's GPU")
def test_without_the_profiles_gpu_it_refuses(tmp_path, capsys):
    out = tmp_path / "r.txt"
    assert adjacent.main(["--out", str(out)]) == 2
    assert "needs a GPU of the profile shipped for --hardware h200-nvswitch" in capsys.readouterr().err
    assert not out.exists()
