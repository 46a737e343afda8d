"""``bench-pairs``: per op and backend pair, the median speedup below 1 MiB and the range from 64 MiB up."""

from __future__ import annotations

from report_records import bench, env, write

from gpucomm.report.docs.kinds import KINDS


def test_speedups_below_1_mib_and_from_64_mib_up(tmp_path):
    rows = []
    for size, speedup in ((1 << 10, 0.9), (1 << 16, 1.1), (64 << 20, 1.5), (256 << 20, 1.25)):
        rows.append(bench("gather", "torch.cuda.comm", size))
        rows.append(bench("gather", "gpucomm.comm", size, speedup=speedup, baseline="torch.cuda.comm"))
    rows.append(bench("scatter", "gpucomm.comm", 1 << 10, speedup=2.0, baseline="torch.cuda.comm", wrong=3))
    path = write(tmp_path / "bench", env(), rows)
    lines = KINDS["bench-pairs"].render(path, {}).splitlines()
    assert lines[2:] == ["| gather | gpucomm.comm | torch.cuda.comm | 4 | 1.00 | 1.25–1.50 | 1.25 (out-of-place, 256 MiB) |"]
    assert len(KINDS["bench-pairs"].render(path, {"ops": "scatter"}).splitlines()) == 2  # wrong rows left out
