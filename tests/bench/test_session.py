"""The run's verdict helpers: --min-busbw judges each series (backend and form) by its largest size."""

from __future__ import annotations

from gpucomm.bench.session import min_busbw_failures
from gpucomm.records import BenchRecord


def _row(size: int, busbw: float, form: str = "plain", n: int = 4, op: str = "all_reduce") -> BenchRecord:
    return BenchRecord(op=op, backend="gpucomm.comm", size=size, count=size // 4, dtype="float32", n=n,
                       world_size=1, placement="in-place", device_type="cuda", timing="cuda-events",
                       time_us_median=1.0, time_us_p99=1.0, algbw_gbps=busbw, busbw_gbps=busbw, wrong=0,
                       iters=1, warmup=0, form=form)


def test_each_form_is_its_own_series():
    rows = [_row(64, 1.0), _row(1024, 50.0), _row(64, 60.0, "prepared"), _row(1024, 5.0, "prepared")]
    low = min_busbw_failures(rows, floor=10.0)
    assert [(r.form, r.size) for r in low] == [("prepared", 1024)]  # small sizes never judge a series


def test_series_that_move_nothing_are_not_judged():
    assert min_busbw_failures([_row(1024, 0.0, n=1, op="all_gather")], floor=10.0) == []
