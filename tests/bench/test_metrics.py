"""Median/p99, algbw/busbw and speedups against hand-computed values."""

from __future__ import annotations

import dataclasses

import pytest

from gpucomm.bench.metrics import SpeedupIndex, assign_speedups, bandwidths, median, percentile, summarize
from gpucomm.records import BenchRecord


def test_percentile_linear_between_order_statistics():
    values = [5.0, 1.0, 4.0, 2.0, 3.0]  # sorted: 1 2 3 4 5
    assert median(values) == 3.0
    assert median([4.0, 1.0, 3.0, 2.0]) == 2.5
    assert percentile(values, 0) == 1.0 and percentile(values, 100) == 5.0
    assert percentile(values, 99) == pytest.approx(4 + 0.96)  # position 3.96
    assert percentile(list(range(1, 21)), 99) == pytest.approx(19.81)  # 20 iterations: near the max


def test_percentile_rejects():
    with pytest.raises(ValueError):
        percentile([], 50)
    with pytest.raises(ValueError):
        percentile([1.0], 101)


def test_summarize_in_microseconds():
    stats = summarize([1e-6, 3e-6, 2e-6])
    assert stats.median_us == pytest.approx(2.0)
    assert stats.p99_us == pytest.approx(2.98)


@pytest.mark.parametrize(("op", "size", "n", "t_us", "algbw", "busbw"), [
    ("all_reduce", 1 << 20, 4, 100.0, 10.48576, 10.48576 * 1.5),      # 2(n-1)/n = 1.5
    ("all_gather", 8 << 20, 8, 1000.0, 8.388608, 8.388608 * 7 / 8),   # (n-1)/n
    ("broadcast", 1_000_000, 8, 10.0, 100.0, 100.0),                  # 1
    ("reduce_scatter", 4096, 1, 1.0, 4.096, 0.0),                     # n = 1 moves nothing
])
def test_bandwidths_hand_computed(op, size, n, t_us, algbw, busbw):
    a, b = bandwidths(op, size, n, t_us)
    assert a == pytest.approx(algbw)
    assert b == pytest.approx(busbw)


def _row(backend, t, placement="in-place", op="broadcast", size=64):
    return BenchRecord(op=op, backend=backend, size=size, count=16, dtype="float32", n=4, world_size=1,
                       placement=placement, device_type="cuda", timing="cuda-events", time_us_median=t,
                       time_us_p99=t, algbw_gbps=1.0, busbw_gbps=1.0, wrong=0, iters=1, warmup=0)


def test_speedup_is_baseline_time_over_time():
    base = _row("torch.cuda.comm", 30.0, placement="out-of-place")
    ours = _row("gpucomm.comm", 10.0, placement="out-of-place")
    index = SpeedupIndex()
    b, o = index.apply(base), index.apply(ours)
    assert b.speedup == 1.0 and b.baseline == "torch.cuda.comm"
    assert o.speedup == pytest.approx(3.0) and o.baseline == "torch.cuda.comm"


def test_speedup_falls_back_to_other_placement_and_says_so():
    rows = assign_speedups([_row("gpucomm.comm", 20.0, "in-place"), _row("torch.cuda.comm", 10.0, "out-of-place")])
    assert rows[0].speedup == pytest.approx(0.5)
    assert "out-of-place" in rows[0].note


def test_no_baseline_no_speedup():
    rows = assign_speedups([_row("gpucomm.comm", 20.0, op="all_reduce"), _row("torch.cuda.comm", 10.0, size=128)])
    assert rows[0].speedup is None and rows[0].baseline is None


def test_dist_baseline_is_raw_torch_distributed():
    rows = assign_speedups([_row("gpucomm.dist", 5.0), _row("torch.distributed", 6.0), _row("torch.cuda.comm", 1.0)])
    assert rows[0].baseline == "torch.distributed" and rows[0].speedup == pytest.approx(1.2)


def test_prepared_rows_divide_the_baselines_plain_time_and_keep_the_plain_row_apart():
    base = _row("torch.distributed", 12.0)
    plain = _row("gpucomm.dist", 15.0)
    prepared = dataclasses.replace(_row("gpucomm.dist", 10.0), form="prepared")
    rows = assign_speedups([plain, prepared, base])
    assert rows[0].speedup == pytest.approx(0.8) and rows[1].speedup == pytest.approx(1.2)
    assert rows[1].baseline == "torch.distributed"
