"""``train``: one row per strategy of a train result directory."""

from __future__ import annotations

from report_records import env, train, write

from gpucomm.report.docs.kinds import KINDS


def test_one_row_per_strategy(tmp_path):
    path = write(tmp_path / "train", env(), [train("single", 1, 100.0), train("ddp", 2, 150.0, equal=False)])
    lines = KINDS["train"].render(path, {}).splitlines()
    assert lines[0].startswith("| strategy | devices | samples/s |")
    assert lines[2].startswith("| single |") and lines[2].endswith("| — |")
    assert lines[3].startswith("| ddp |") and "| 150.0 | 19,200 |" in lines[3] and lines[3].endswith("| NO |")
