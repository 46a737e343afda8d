"""What a bench run's buffers need, per place, from the collective rows — and the refusal when they do not fit."""

from __future__ import annotations

import subprocess
import sys

import torch

from gpucomm.bench import backends as _backends
from gpucomm.bench import memory
from gpucomm.bench.config import BenchConfig
from gpucomm.bench.runner import plan
from gpucomm.collectives import ReduceOp
from gpucomm.testing.markers import requires_gpus

MiB, GiB = 1 << 20, 1 << 30


def _cfg(**kw) -> BenchConfig:
    base = dict(ops=("all_reduce",), backends=("gpucomm.comm", "torch.distributed"), sizes=(MiB,),
                dtypes=(torch.float32,), reduce_ops=(ReduceOp.SUM,), iters=2, warmup=1, check=1, device_type="cpu",
                devices=(torch.device("cpu"),) * 4, nproc=2)
    return BenchConfig(**{**base, **kw})


def _points(cfg: BenchConfig):
    local = [_backends.BACKENDS["gpucomm.comm"]]
    group = [_backends.BACKENDS["torch.distributed"]]
    return plan(cfg, local, len(cfg.devices)), plan(cfg, group, cfg.nproc)


def _worst(needs, placement, group):
    return max(n.nbytes for n in needs if n.point.case.placement == placement
               and (n.point.backend == "torch.distributed") == group)


def test_all_reduce_needs_its_rotating_sets_and_the_check_reference():
    cfg = _cfg()
    needs = memory.needs(cfg, *_points(cfg))
    assert {n.place for n in needs} == {memory.HOST}
    # one process, in place: 4 participants x 1 MiB = 4 MiB a set, 8 sets (the most) to cover 32 MiB;
    # the check's float64 reference of one participant's 1 MiB float32 output is 2 MiB
    assert _worst(needs, "in-place", group=False) == 8 * 4 * MiB + 2 * MiB
    # two gloo ranks: each 1 MiB a set, 8 sets, and both check at once
    assert _worst(needs, "in-place", group=True) == 2 * (8 * MiB + 2 * MiB)
    unchecked = memory.needs(_cfg(check=0), *_points(_cfg(check=0)))
    assert _worst(unchecked, "in-place", group=False) == 8 * 4 * MiB


def test_all_gather_out_of_place_counts_input_chunk_and_output():
    cfg = _cfg(ops=("all_gather",))
    needs = memory.needs(cfg, *_points(cfg))
    # 4 participants x (256 KiB in + 1 MiB out) = 5 MiB a set: 7 sets cover 32 MiB
    assert _worst(needs, "out-of-place", group=False) == 7 * 5 * MiB + 2 * MiB


def test_gpu_places_are_counted_per_device():
    cfg = _cfg(device_type="cuda", devices=(torch.device("cuda:0"),) * 2 + (torch.device("cuda:1"),), nproc=2,
               backends=("gpucomm.comm",))
    local = plan(cfg, [_backends.BACKENDS["gpucomm.comm"]], 3)
    by_place = {}
    for n in memory.needs(cfg, local, []):
        by_place[n.place] = max(by_place.get(n.place, 0), n.nbytes)
    assert set(by_place) == {"cuda:0", "cuda:1"}
    assert by_place["cuda:0"] > by_place["cuda:1"]  # two participants share cuda:0


def test_a_run_that_fits_is_not_refused_and_one_that_does_not_says_need_and_have():
    cfg = _cfg(sizes=(MiB, 64 * MiB, GiB))
    points = _points(cfg)
    assert memory.refusal(cfg, *points, available=lambda place: 64 * GiB) is None
    line = memory.refusal(cfg, *points, available=lambda place: 2 * GiB)
    assert line is not None and "\n" not in line
    assert line.startswith("--maxbytes: all_reduce on ") and "at 1 GiB needs" in line
    assert "2.0 GiB is available" in line and "host memory" in line
    assert "lower --maxbytes to 64M or less" in line


def test_nothing_fits_suggests_smaller_sizes():
    cfg = _cfg(sizes=(GiB,))
    line = memory.refusal(cfg, *_points(cfg), available=lambda place: MiB)
    assert "lower --minbytes and --maxbytes" in line


@requires_gpus(1)
def test_a_sweep_beyond_the_gpu_is_refused_with_its_free_memory(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "gpucomm", "bench", "-b", "1024G", "-e", "1024G", "--ops",
                           "all_reduce", "--backends", "gpucomm.comm"], capture_output=True, text=True, cwd=tmp_path,
                          timeout=120)
    assert proc.returncode == 2, proc
    assert proc.stderr.count("\n") == 1 and "of cuda:0's memory" in proc.stderr and "GiB is free" in proc.stderr
    assert not list(tmp_path.iterdir())
