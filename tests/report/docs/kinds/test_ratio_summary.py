"""``ratio-summary``: per first-column value, the range of every ratio column."""

from __future__ import annotations

from gpucomm.report.docs.kinds import KINDS


def test_ranges_per_group_and_a_bare_ratio_column_named_after_its_neighbour(tmp_path):
    path = tmp_path / "x_cpu_2026-12-03.md"
    path.write_text("# t\n\n| op | size | ours (us) | ratio | plain ratio |\n|---|---:|---:|---:|---:|\n"
                    "| gather | 8 B | 1 | 0.9 | 1.1 |\n| gather | 1 MiB | 2 | 1.2 | 1.1 |\n| scatter | 8 B | 1 | 1.0 | n/a |\n")
    assert KINDS["ratio-summary"].render(path, {}).splitlines() == [
        "| op | rows | ours ratio (min–max) | plain ratio (min–max) |", "|---|---:|---:|---:|",
        "| gather | 2 | 0.900–1.200 | 1.100 |", "| scatter | 1 | 1.000 | — |"]
