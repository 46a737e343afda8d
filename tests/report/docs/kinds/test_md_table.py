"""``md-table``: a results file's first table as it is, or only the columns asked for."""

from __future__ import annotations

from gpucomm.report.docs.kinds import KINDS


def test_first_table_whole_or_some_columns(tmp_path):
    path = tmp_path / "x_cpu_2026-12-03.md"
    path.write_text("intro\n\n| name | ms | note |\n|---|---|---|\n| a | 1.5 | fine |\n\n| other | t |\n|---|---|\n")
    render = KINDS["md-table"].render
    assert render(path, {}).splitlines() == ["| name | ms | note |", "|---|---:|---|", "| a | 1.5 | fine |"]
    assert render(path, {"cols": "2,0"}).splitlines() == ["| note | name |", "|---|---|", "| fine | a |"]
