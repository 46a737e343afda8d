"""benchmarks/host_speed.py: bad input is one line and exit 2, nothing written; its timers time what they say
(the rounds themselves need the shipped profile's GPU: benchmarks/results/host-speed_h200x1_*.txt)."""

from __future__ import annotations

import importlib.util
import sys
import time
from pathlib import Path

import pytest
import torch

_ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("host_speed", _ROOT / "benchmarks" / "host_speed.py")
speed = importlib.util.module_from_spec(_spec)
sys.modules["host_speed"] = speed
_spec.loader.exec_module(speed)


def test_bad_seconds_is_one_line_and_exit_2(tmp_path, capsys):
    out = tmp_path / "r.txt"
    assert speed.main(["--seconds", "0", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "host_speed: error: --seconds/--window: expected positive seconds, but got 0.0/0.3"
    assert not out.exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason="the refusal without the profile's GPU")
def test_without_the_profiles_gpu_it_refuses(tmp_path, capsys):
    out = tmp_path / "r.txt"
    assert speed.main(["--out", str(out)]) == 2
    assert "needs a GPU of the profile shipped for --hardware h200-nvswitch" in capsys.readouterr().err
    assert not out.exists()


def test_a_rate_is_calls_a_second_over_its_window():
    """A call that sleeps 10 ms runs under 100 times a second, and the window is at least what was asked."""
    t0 = time.perf_counter()
    got = speed.rate(lambda: time.sleep(0.01), 0.05)
    assert time.perf_counter() - t0 >= 0.05 and 50 < got < 100
    assert speed.python_work() == speed.python_work()  # a fixed workload
