"""The Strategy interface: what a strategy says about itself, host time by phase, and the shared helpers."""

import threading
import time

import pytest
import torch

from gpucomm.testing.markers import requires_gpus
from gpucomm.train.config import TrainConfig
from gpucomm.train.strategies.base import StepResult, Strategy, pin, split_batch, to_device


class _Plain(Strategy):
    name = "plain-test"

    def prepare(self, workload):
        pass

    def step(self, step, batch):
        return StepResult(loss=torch.zeros(()))

    def state(self):
        return {}


def _cfg(**kw):
    base = dict(model="mlp", steps=3, warmup_steps=1, global_batch=8, devices=["cpu"] * 4)
    return TrainConfig(**{**base, **kw})


def test_defaults_drive_every_device_in_one_process():
    cfg = _cfg()
    assert _Plain.devices_needed(cfg) == cfg.devices
    assert _Plain.world_size(cfg) == 1 and _Plain.needs_process_group(cfg) is False
    assert _Plain.notes(cfg) == [] and _Plain.not_applicable(cfg) is None
    s = _Plain(cfg, cfg.devices)
    assert (s.rank, s.world, s.graphs) == (0, 1, False)


def test_rank_devices_are_equal_slices_and_an_uneven_split_is_refused():
    cfg = _cfg()
    assert [len(_Plain.rank_devices(cfg, r, 2)) for r in range(2)] == [2, 2]
    assert _Plain.rank_devices(cfg, 3, 4) == [torch.device("cpu")]
    with pytest.raises(ValueError, match="4 devices do not split evenly over 3 processes"):
        _Plain.rank_devices(cfg, 0, 3)


def test_host_phases_accumulate_per_step_and_reset_when_taken():
    s = _Plain(_cfg(), [torch.device("cpu")])
    with s.host_phase("replicate"):
        time.sleep(0.01)
    with s.host_phase("replicate"):
        pass
    with s.host_phase("gather"):
        pass
    phases = s.take_host_phases()
    assert set(phases) == {"replicate", "gather"} and phases["replicate"] >= 0.01
    assert s.take_host_phases() == {}


def test_host_phases_from_several_threads_add_up():
    s = _Plain(_cfg(), [torch.device("cpu")])

    def work():
        for _ in range(20):
            with s.host_phase("launch"):
                time.sleep(0.001)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    total = s.take_host_phases()["launch"]
    assert total >= 4 * 20 * 0.001  # every thread's time counted, none lost to a race


def test_a_phase_that_raises_still_counts():
    s = _Plain(_cfg(), [torch.device("cpu")])
    with pytest.raises(RuntimeError), s.host_phase("scatter"):
        raise RuntimeError("x")
    assert "scatter" in s.take_host_phases()


def test_split_batch_in_order_and_errors():
    x, y = torch.arange(8).reshape(8, 1), torch.arange(8)
    shards = split_batch((x, y), 2, 8)
    assert [s[1].tolist() for s in shards] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    with pytest.raises(ValueError, match="dim 0 = global batch 6, but got 8"):
        split_batch((x, y), 2, 6)
    with pytest.raises(ValueError, match="does not divide by 3"):
        split_batch((x, y), 3, 8)
    with pytest.raises(ValueError, match="expected \\(inputs, targets\\)"):
        split_batch(x, 2, 8)


def test_pin_leaves_cpu_batches_alone_without_cuda_and_to_device_keeps_structure():
    batch = (torch.ones(2), [torch.zeros(2), 3])
    pinned = pin(batch)
    if not torch.cuda.is_available():
        assert pinned[0] is batch[0]
    moved = to_device(pinned, torch.device("cpu"))
    assert isinstance(moved, tuple) and isinstance(moved[1], list) and moved[1][1] == 3


@requires_gpus(1)
def test_peak_memory_reset_works_as_the_first_cuda_call_of_a_process():
    # Before CUDA's lazy init the caching allocator knows no device ("Invalid device argument" on torch 2.11):
    # `gpucomm train --strategies single,...` failed so when single was the first strategy of the process.
    import subprocess
    import sys

    code = ("import torch; from gpucomm.train.strategies.base import reset_peak_memory, peak_memory; "
            "d = [torch.device('cuda:0')]; reset_peak_memory(d); print(peak_memory(d))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
