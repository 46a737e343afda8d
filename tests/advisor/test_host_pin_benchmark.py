"""benchmarks/host_pin.py: bad input is one line and exit 2, nothing written; the pin holds every thread and is
undone; the variance split and the spread are the textbook ones (the rounds themselves need the shipped
profile's GPU: benchmarks/results/host-pin_h200x1_*.txt)."""

from __future__ import annotations

import importlib.util
import math
import os
import sys
import threading
from pathlib import Path

import pytest
import torch

_ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("host_pin", _ROOT / "benchmarks" / "host_pin.py")
pin = importlib.util.module_from_spec(_spec)
sys.modules["host_pin"] = pin
_spec.loader.exec_module(pin)


def test_bad_seconds_is_one_line_and_exit_2(tmp_path, capsys):
    out = tmp_path / "r.txt"
    assert pin.main(["--sweep", "0", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "host_pin: error: --seconds/--window/--sweep: expected positive seconds, but got 80.0/0.3/0.0"
    assert not out.exists()


def test_a_cpu_outside_the_affinity_is_refused(tmp_path, capsys):
    out = tmp_path / "r.txt"
    cpus = sorted(os.sched_getaffinity(0))
    assert pin.main(["--cpu", str(cpus[-1] + 1000), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("host_pin: error: --cpu: expected one of this process's CPUs") and "\n" not in err
    assert not out.exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason="the refusal without the profile's GPU")
@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs to get past the CPU check")
def test_without_the_profiles_gpu_it_refuses(tmp_path, capsys):
    out = tmp_path / "r.txt"
    assert pin.main(["--out", str(out)]) == 2
    assert "needs a GPU of the profile shipped for --hardware h200-nvswitch" in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="pinning to one of two CPUs")
def test_pinned_holds_every_thread_and_restores_the_affinity():
    before = os.sched_getaffinity(0)
    cpu = max(before)
    started, stop = threading.Event(), threading.Event()
    seen = {}

    def worker():
        seen["tid"] = threading.get_native_id()
        started.set()
        stop.wait(5)

    t = threading.Thread(target=worker)
    t.start()
    started.wait(5)
    try:
        with pin.pinned(cpu):
            assert os.sched_getaffinity(0) == {cpu}
            assert os.sched_getaffinity(seen["tid"]) == {cpu}  # a thread started before the pin is pinned too
        assert os.sched_getaffinity(0) == before and os.sched_getaffinity(seen["tid"]) == before
        with pin.pinned(None):
            assert os.sched_getaffinity(0) == before
    finally:
        stop.set()
        t.join()


def test_variance_split_by_hand():
    """Paces e^(r_i + c_j + interaction): each sum of squares of the log table over the total."""
    e = math.exp
    # round effects 0 and 2, CPU effects 0 and 1, no interaction: SS rounds = 2 CPUs x 2 x 1^2 = 4,
    # SS CPUs = 2 rounds x 2 x 0.5^2 = 1, total 5
    table = [[e(0), e(1)], [e(2), e(3)]]
    t, c, rest = pin.variance_split(table)
    assert (t, c, rest) == pytest.approx((0.8, 0.2, 0.0))
    # only interaction: [[1, e], [e, 1]]: log table [[0,1],[1,0]], row and column means all 0.5
    assert pin.variance_split([[1.0, e(1)], [e(1), 1.0]]) == pytest.approx((0.0, 0.0, 1.0))
    assert pin.variance_split([[2.0, 2.0], [2.0, 2.0]]) == (0.0, 0.0, 1.0)


def test_spread_is_max_over_min_and_relative_mad():
    assert pin.spread([1.0, 2.0, 4.0]) == pytest.approx((4.0, 1.0 / 2.0))  # MAD of |1-2|,0,|4-2| = 1, / 2
