"""The loop's measurement: per-step event arithmetic (with stand-in events), CPU timing, host time, phases."""

import pytest
import torch

from gpucomm.testing.markers import requires_gpus
from gpucomm.train.config import TrainConfig
from gpucomm.train.loop import StepClock, median_phases, run_strategy
from gpucomm.train.models import load_workload
from gpucomm.train.strategies.single import SingleStrategy


class _FakeEvent:
    """A CUDA event stand-in: ``record`` stamps the time the test says the device reached it."""

    now: dict = {}

    def __init__(self, enable_timing=False):
        self.t = None

    def record(self, stream=None):
        self.t = _FakeEvent.now[stream]

    def elapsed_time(self, other):
        return other.t - self.t


@pytest.fixture
def fake_cuda(monkeypatch):
    monkeypatch.setattr(torch.cuda, "Event", _FakeEvent)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda d: d.index)
    return _FakeEvent.now


def test_step_time_is_the_cadence_of_step_ends_and_the_slowest_device_counts(fake_cuda):
    devices = [torch.device("cuda", 0), torch.device("cuda", 1), torch.device("cuda", 0)]
    clock = StepClock(devices, 3)
    assert clock.enabled and clock.devices == devices[:2]  # a repeated device is timed once
    # device 0 ends steps at 10, 20, 30; device 1 lags and ends at 12, 25, 38
    timeline = [((0, 0), (10, 12)), ((9, 11), (20, 25)), ((19, 24), (30, 38))]
    for s, (starts, ends) in enumerate(timeline):
        fake_cuda.update({0: starts[0], 1: starts[1]})
        clock.start(s)
        fake_cuda.update({0: ends[0], 1: ends[1]})
        clock.end(s)
    assert clock.step_ms(1, 3) == [14, 13]  # window from step 1: its own start (11 -> 25), then 25 -> 38
    assert clock.step_ms(0, 3) == [12, 13, 13]  # device 1 sets the pace: 0 -> 12, 12 -> 25, 25 -> 38
    assert clock.gpu_ms(1, 3) == [11, 11]  # start-to-end on the first device
    assert clock.span_ms(0, 1) == [12]


def test_no_events_on_cpu():
    clock = StepClock([torch.device("cpu")] * 2, 4)
    assert not clock.enabled
    clock.start(0)
    clock.end(0)  # no-ops


def _cfg(**kw):
    base = dict(model="mlp", steps=5, warmup_steps=2, global_batch=8, devices=["cpu"])
    return TrainConfig(**{**base, **kw})


def test_cpu_run_times_with_the_host_clock_and_keeps_the_window():
    cfg = _cfg()
    steps = []
    run = run_strategy(SingleStrategy(cfg, cfg.devices), load_workload("mlp"), cfg,
                       on_step=lambda done, total: steps.append((done, total)))
    assert steps == [(k, 5) for k in range(1, 6)]
    assert len(run.step_ms) == 5 and run.gpu_ms is None
    assert run.host_ms == run.step_ms[2:] and run.host_source == "timed steps"
    assert run.window_ms >= sum(run.step_ms[2:]) * 0.99  # the window holds the timed steps
    assert len(run.host_phases_ms) == 3 and all("backward" in p for p in run.host_phases_ms)


def test_teardown_runs_even_when_a_step_raises():
    cfg = _cfg()
    torn = []

    class Broken(SingleStrategy):
        def step(self, step, batch):
            raise RuntimeError("x")

        def teardown(self):
            torn.append(True)

    with pytest.raises(RuntimeError):
        run_strategy(Broken(cfg, cfg.devices), load_workload("mlp"), cfg)
    assert torn == [True]


def test_median_phases_count_a_missing_phase_as_zero():
    assert median_phases([{"a": 1.0, "b": 4.0}, {"a": 3.0}, {"a": 2.0, "b": 2.0}]) == {"a": 2.0, "b": 2.0}
    assert median_phases([]) == {}


def test_nothing_waits_for_the_devices_between_timed_steps():
    cfg = _cfg(steps=6, warmup_steps=2)
    calls = []

    class Spy(SingleStrategy):
        def synchronize(self):
            calls.append("sync")

        def step(self, step, batch):
            calls.append(step)
            return super().step(step, batch)

    run_strategy(Spy(cfg, cfg.devices), load_workload("mlp"), cfg)
    # before each warmup step and before the window, then once after the last step; none inside the window
    assert calls == ["sync", 0, "sync", 1, "sync", 2, 3, 4, 5, "sync"]


@requires_gpus(1)
def test_on_cuda_steps_are_timed_by_events_and_host_time_by_idle_warmup_steps():
    cfg = _cfg(steps=6, warmup_steps=3, devices=["cuda:0"])
    run = run_strategy(SingleStrategy(cfg, cfg.devices), load_workload("mlp"), cfg)
    assert len(run.step_ms) == 6 and len(run.gpu_ms) == 3 and all(t > 0 for t in run.step_ms)
    assert run.host_source.startswith("warmup") and len(run.host_ms) == 2
    assert all(isinstance(v, float) for v in run.losses)
