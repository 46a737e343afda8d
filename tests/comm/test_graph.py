"""gpucomm.comm._graph: capture refuses CPU participants; on a GPU the replay reruns the captured work."""

from __future__ import annotations

import pytest
import torch

from gpucomm.comm._graph import capture
from gpucomm.testing.markers import requires_gpus


def test_capture_refuses_cpu_devices_with_the_fix():
    with pytest.raises(ValueError, match=r"^graph: expected .* \(cpu is not a GPU\); use graph=False"):
        capture(lambda: None, [torch.device("cpu")])


def test_capture_refuses_several_devices():
    with pytest.raises(ValueError, match=r"^graph: expected .*one CUDA device, but got devices \['cuda:0', 'cuda:1'\]"):
        capture(lambda: None, [torch.device("cuda", 1), torch.device("cuda", 0)])


@requires_gpus(1)
def test_capture_replays_the_work_on_current_contents():
    x = torch.ones(16, device="cuda:0")
    y = torch.zeros(16, device="cuda:0")
    calls = []

    def run():
        calls.append(1)
        y.copy_(x * 2)

    replay = capture(run, [torch.device("cuda", 0)])
    assert len(calls) == 4  # three warm-up calls and the captured one; replays run no Python
    x.fill_(5.0)
    replay()
    torch.cuda.synchronize()
    assert torch.equal(y, torch.full((16,), 10.0, device="cuda:0"))
    assert len(calls) == 4


class _FakeGraph:
    """Stands in for torch.cuda.CUDAGraph on a CPU build: records the calls made while capturing."""

    def __init__(self):
        self.captured = 0
        self.replays = 0

    def replay(self):
        self.replays += 1


class _Ctx:
    def __init__(self, *args, **kwargs):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def wait_stream(self, other):
        pass


def _fake_cuda(monkeypatch):
    graphs = []

    def new_graph():
        graphs.append(_FakeGraph())
        return graphs[-1]

    monkeypatch.setattr(torch.cuda, "device", _Ctx)
    monkeypatch.setattr(torch.cuda, "Stream", _Ctx)
    monkeypatch.setattr(torch.cuda, "stream", _Ctx)
    monkeypatch.setattr(torch.cuda, "current_stream", _Ctx)
    monkeypatch.setattr(torch.cuda, "graph", _Ctx)
    monkeypatch.setattr(torch.cuda, "CUDAGraph", new_graph)
    return graphs


def test_capture_keeps_what_run_holds_alive_as_long_as_the_replay(monkeypatch):
    # A graph records raw addresses: a scratch buffer only the bound kernel references must not be
    # freed (and handed to the caller's next tensor) when capture returns.  The H200 run showed
    # exactly that: prepared reduce/all_reduce (stacked into a scratch buffer) replayed wrong values.
    import gc
    import weakref

    from gpucomm.collectives import ReduceOp
    from gpucomm.comm import _reductions

    graphs = _fake_cuda(monkeypatch)
    ts = [torch.full((8,), float(i + 1)) for i in range(3)]
    run = _reductions.bind_all_reduce(ts, ts, ReduceOp.SUM)
    scratch = [c.cell_contents for c in run.__closure__
               if isinstance(c.cell_contents, torch.Tensor) and c.cell_contents.shape == (3, 8)]
    assert len(scratch) == 1  # the bound stacked reduction's buffer, referenced by run alone
    alive = weakref.ref(scratch[0])
    del scratch
    replay = capture(run, [torch.device("cuda", 0)] * 3)
    assert torch.equal(ts[1], torch.full((8,), 162.0))  # 3 warm-ups + the captured call: 6, 18, 54, 162
    del run
    gc.collect()
    assert alive() is not None
    replay()
    assert graphs[0].replays == 1
    del replay
    graphs.clear()
    gc.collect()
    assert alive() is None  # and freed with the replay: no leak
