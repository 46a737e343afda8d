"""gpucomm.bench.timing: the three timers and the choice between them."""

import pytest
import torch

from gpucomm.bench import timing
from gpucomm.bench.timing import (
    CUDA_EVENTS,
    CUDA_GRAPH,
    PERF_COUNTER,
    EventTimer,
    GraphTimer,
    PerfCounterTimer,
    make_timer,
)
from gpucomm.testing import requires_gpus

CPU = torch.device("cpu")


def test_perf_counter_times_each_step_with_the_sync_inside(monkeypatch):
    clock = iter([0.0, 0.5, 1.0, 1.25, 2.0, 2.125])
    monkeypatch.setattr(timing.time, "perf_counter", lambda: next(clock))
    log = []
    timer = PerfCounterTimer(lambda: log.append("sync"))
    times = timer.run(lambda i: log.append(i), 3)
    assert times == [0.5, 0.25, 0.125]
    assert log == [0, "sync", 1, "sync", 2, "sync"]  # one sync per op, inside its interval


def test_make_timer_picks_by_mode_and_refuses_unknown_modes():
    assert isinstance(make_timer(PERF_COUNTER, [CPU], lambda: None), PerfCounterTimer)
    assert make_timer(PERF_COUNTER, [CPU], lambda: None).mode == "perf-counter"
    assert isinstance(make_timer(CUDA_EVENTS, [CPU], lambda: None), EventTimer)
    assert isinstance(make_timer(CUDA_GRAPH, [CPU], lambda: None), GraphTimer)
    with pytest.raises(ValueError) as info:
        make_timer("wall", [CPU], lambda: None)
    assert str(info.value) == "timing: unknown mode 'wall'; expected cuda-events, cuda-graph or perf-counter"


def test_event_timer_holds_each_cuda_device_once_and_ignores_the_cpu():
    devices = [torch.device("cuda", 1), CPU, torch.device("cuda", 0), torch.device("cuda", 1)]
    assert timing._cuda_indices(devices) == [0, 1]
    assert timing._cuda_indices([CPU]) == []


@requires_gpus(1)
def test_event_timer_runs_each_step_once_and_returns_one_time_per_iteration():
    a = torch.zeros(1024, device="cuda:0")
    seen = []
    times = EventTimer([torch.device("cuda:0"), torch.device("cuda:0")]).run(
        lambda i: (seen.append(i), a.add_(1)), 5)
    assert seen == [0, 1, 2, 3, 4] and len(times) == 5 and all(t > 0 for t in times)
    assert a[0].item() == 5.0  # synchronised before returning: every step's work is done


@requires_gpus(1)
def test_graph_timer_captures_graph_ops_steps_and_divides_by_them():
    x = torch.zeros(4, device="cuda:0")
    seen = []
    timer = GraphTimer(torch.device("cuda:0"))
    timer.capture(lambda i: (seen.append(i), x.add_(1)), warmup=2)
    assert seen == [0, 1] + list(range(timing.GRAPH_OPS))
    torch.cuda.synchronize()
    before = x[0].item()
    times = timer.run(lambda i: None, 3)
    torch.cuda.synchronize()
    assert len(times) == 3 and all(t > 0 for t in times)
    assert x[0].item() == before + 3 * timing.GRAPH_OPS  # each replay ran every captured op
