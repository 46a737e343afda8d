"""The end of a run: --min-busbw judges each series (backend and form) by its largest size; the last lines
are the run's answer, checked in a terminal emulator at 80 and 120 columns."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from gpucomm.bench.session import min_busbw_failures
from gpucomm.records import BenchRecord, load
from gpucomm.report.findings import bench_answer, bench_glance, glance
from gpucomm.testing.terminal import run_in_pty, screen_lines


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


# ----- the run ends with its answer (tested in a terminal emulator, as tests/bench/test_display.py does) -----
def _screen(argv: list[str], cols: int, rows: int) -> list[str]:
    """What a person sees after running ``argv`` in a ``cols`` x ``rows`` terminal (trailing blanks dropped)."""
    pytest.importorskip("pyte")
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "NO_COLOR", "FORCE_COLOR")}
    env.update(TERM="xterm-256color", PYTHONPATH=str(Path(__file__).resolve().parents[2] / "src"))
    status, data = run_in_pty(argv, cols, rows, env=env)
    assert status == 0, data[-2000:].decode(errors="replace")
    lines = screen_lines(data, cols, rows)
    while lines and not lines[-1]:
        lines.pop()
    return lines


@pytest.mark.slow
@pytest.mark.parametrize("cols", [80, 120])
def test_a_run_ends_with_its_answer_in_at_most_five_lines(tmp_path, cols):
    out = tmp_path / "run"
    argv = [sys.executable, "-m", "gpucomm", "bench", "-b", "1K", "-e", "64K", "-n", "3", "-w", "1", "--out", str(out)]
    lines = _screen(argv, cols, 40)
    assert max(len(line) for line in lines) <= cols
    rows = load(out).bench
    expected = bench_glance(rows, cols)
    assert glance.screen_lines(bench_answer(rows), cols) > 5  # every op of two pairs: more than a glance holds
    assert expected[0].startswith("answer: ")
    start = max(i for i, line in enumerate(lines) if line.startswith("answer: "))
    tail = lines[start:]
    assert len(tail) <= 5, "\n".join(tail)
    assert not any(line.startswith(("records:", "report", "plots:")) for line in tail)  # the answer is last
    # every answer line starts a screen line; its continuations are indented, nothing else follows
    starts = [i for i, line in enumerate(tail) if not line.startswith("  ")]
    assert len(starts) == len(expected)
    joined = [" ".join(x.strip() for x in tail[a:b]) for a, b in zip(starts, [*starts[1:], len(tail)], strict=True)]
    assert joined == expected
    text = " ".join(joined)  # a verdict per pair, over the ops of the run (on CPU or GPU: whichever wins)
    assert "gpucomm.dist" in text
    # condensed (not every op of the run named), the answer says where each op's detail is; on a loaded
    # machine many rows are too noisy, the noisy ops share one clause and every op fits by name
    assert all(op in text for op in {r.op for r in rows}) or ("report.md" in text and " ops" in text), text
    assert any(verdict in text for verdict in ("faster at", "slower at", "mixed at", "on par at")), text
