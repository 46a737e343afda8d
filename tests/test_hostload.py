"""gpucomm.hostload: the hypervisor's steal between two readings of every CPU's counters."""

from __future__ import annotations

import collections

import pytest

from gpucomm import hostload

_T = collections.namedtuple("_T", "user nice system idle iowait irq softirq steal guest guest_nice")


def _cpu(steal: float, busy: float, guest: float = 0.0) -> _T:
    return _T(user=busy, nice=0.0, system=0.0, idle=10.0, iowait=0.0, irq=0.0, softirq=0.0, steal=steal,
              guest=guest, guest_nice=0.0)


def test_steal_is_a_share_of_the_time_that_passed_over_all_cpus_and_on_the_worst(monkeypatch):
    """Two CPUs: between the readings CPU 0 spent 10 s (1 stolen), CPU 1 10 s (3 stolen) -> 4 / 20 over all,
    3 / 10 on the worst.  Guest time is inside user time on Linux and is not counted twice."""
    import psutil

    readings = iter([[_cpu(0, 0), _cpu(0, 0)], [_cpu(1, 9, guest=5), _cpu(3, 7)]])
    monkeypatch.setattr(psutil, "cpu_times", lambda percpu=False: next(readings))
    before = hostload.snapshot()
    assert before == hostload.Snapshot(((0.0, 10.0), (0.0, 10.0)))
    got = hostload.steal_since(before)
    assert got == hostload.Steal(share=pytest.approx(4 / 20), most=pytest.approx(3 / 10))
    assert str(got) == "steal 20.0% of all CPUs' time, 30.0% on the most-stolen one"


def test_no_steal_reading_where_the_counters_cannot_say(monkeypatch):
    import psutil

    a = hostload.Snapshot(((0.0, 1.0),))
    assert hostload.steal_since(None, a) is None
    assert hostload.steal_since(a, hostload.Snapshot(((0.0, 1.0), (0.0, 1.0)))) is None  # a CPU came online
    assert hostload.steal_since(a, a) is None  # no time passed on the counters
    no_steal = collections.namedtuple("_T", "user system idle")
    monkeypatch.setattr(psutil, "cpu_times", lambda percpu=False: [no_steal(1.0, 1.0, 1.0)])
    assert hostload.snapshot() is None  # psutil counts steal on Linux only


def test_a_real_reading_here_is_a_share_between_zero_and_one():
    before = hostload.snapshot()
    sum(i * i for i in range(2_000_000))  # let the counters tick
    got = hostload.steal_since(before)
    if before is None:
        pytest.skip("this platform does not count steal")
    assert got is None or 0.0 <= got.share <= got.most <= 1.0


def test_the_gc_timer_counts_each_collection_by_generation_and_its_time():
    import gc

    with hostload.GcTimer() as t:
        gc.collect(0)
        gc.collect(2)
        gc.collect(2)
    assert t.collections == [1, 0, 2] and t.seconds > 0
    assert str(t).endswith("in 3 collections (2 full)")
    gc.collect()
    assert t.collections == [1, 0, 2]  # outside the block: not counted, the callback is gone
