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
