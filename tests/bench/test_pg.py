"""gpucomm.bench.pg: the process-group phase (cross-rank combining, the row stream, the spawned run)."""

import json

import pytest
import torch

from gpucomm.bench import pg
from gpucomm.bench.config import BenchConfig
from gpucomm.collectives import CollectiveName, ReduceOp
from gpucomm.testing import spawn


def cfg(**changes) -> BenchConfig:
    base = dict(ops=(CollectiveName("all_reduce"),), backends=("torch.distributed", "gpucomm.dist"),
                sizes=(8, 1024), dtypes=(torch.float32,), reduce_ops=(ReduceOp.SUM,), iters=2, warmup=1,
                check=1, device_type="cpu", nproc=2, timeout=120.0)
    return BenchConfig(**{**base, **changes})


def test_cpu_runs_use_gloo_and_cuda_runs_nccl():
    assert pg._backend_for(cfg()) == "gloo"
    assert pg._backend_for(cfg(device_type="cuda")) == "nccl"


def test_stream_reader_returns_only_complete_new_lines(tmp_path):
    path = tmp_path / "rows.jsonl"
    reader = pg._StreamReader(path)
    assert reader.new_rows() == []  # no file yet: nothing, no error
    path.write_text('{"a": 1}\n{"b": ')
    assert reader.new_rows() == [{"a": 1}]  # the partial second line waits
    with open(path, "a") as f:
        f.write('2}\n\n{"c": 3}\n')
    assert reader.new_rows() == [{"b": 2}, {"c": 3}]
    assert reader.new_rows() == [] and reader.count == 3


def _combine_body(times, wrong):
    import torch.distributed as td

    rank = td.get_rank()
    combine = pg._combine(torch.device("cpu"))
    return combine(times[rank], wrong[rank])


@pytest.mark.slow
def test_combine_takes_the_slowest_rank_per_iteration_and_sums_wrong():
    times = [[1.0, 5.0, 2.0], [3.0, 4.0, 2.5]]
    results = spawn(_combine_body, times, [1, 2])
    assert results == [([3.0, 5.0, 2.5], 3), ([3.0, 5.0, 2.5], 3)]


@pytest.mark.slow
def test_combine_keeps_not_checked_as_minus_one():
    results = spawn(_combine_body, [[1.0], [2.0]], [-1, -1])
    assert results == [([2.0], -1), ([2.0], -1)]


@pytest.mark.slow
def test_run_spawned_streams_every_row_once_and_returns_the_summary(tmp_path):
    rows = []
    stream = tmp_path / "stream.jsonl"
    summary = pg.run_spawned(cfg(), rows.append, stream, poll_s=0.05)
    keys = sorted((r.backend, r.size, r.form) for r in rows)
    assert len(keys) == len(set(keys)) == summary["planned"]  # no row lost, none emitted twice
    assert {r.backend for r in rows} == {"torch.distributed", "gpucomm.dist"}
    assert all(r.op == "all_reduce" and r.wrong == 0 and r.timing == "perf-counter" for r in rows)
    assert summary["problems"] == [] and "rows" not in summary
    streamed = [json.loads(line) for line in stream.read_text().splitlines()]
    assert len(streamed) == len(rows)
