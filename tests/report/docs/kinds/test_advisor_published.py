"""``advisor-published``: the file's tables, each table's caption line and the summary lines, nothing else."""

from __future__ import annotations

from gpucomm.report.docs.kinds import KINDS


def test_keeps_tables_captions_and_summary(tmp_path):
    path = tmp_path / "advisor-published_x_2026-12-03.txt"
    path.write_text("# title\n\ncommand: x\n\n| id | error |\n|---|---:|\n| a | +1.0% |\n\nNot evaluated:\n\n- b\n\n"
                    "summary: 1 rows; median 1.0%\n  of which 1 rows: fine\n\nSecond table:\n\n| row | e |\n"
                    "|---|---:|\n| c | 2 |\nother: line\n")
    text = KINDS["advisor-published"].render(path, {})
    assert text == ("| id | error |\n|---|---:|\n| a | +1.0% |\n\n- summary: 1 rows; median 1.0%\n"
                    "- of which 1 rows: fine\n\nSecond table:\n\n| row | e |\n|---|---:|\n| c | 2 |")
