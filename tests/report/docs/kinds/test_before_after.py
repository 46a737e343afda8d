"""``before-after``: the median of interleaved before and after tables, and the change."""

from __future__ import annotations

from gpucomm.report.docs.kinds import KINDS


def test_medians_of_alternating_tables_and_the_change(tmp_path):
    path = tmp_path / "x_cpu_2026-12-03.txt"
    blocks = []
    for before, after in ((10.0, 8.0), (12.0, 9.0), (11.0, 8.5)):
        blocks += ["# before", "method us", f"plain {before}", "", "# after", "method us", f"plain {after}", ""]
    path.write_text("\n".join(blocks))
    assert KINDS["before-after"].render(path, {}).splitlines()[2] == "| plain | 11.00 | 8.50 | -23% |"
