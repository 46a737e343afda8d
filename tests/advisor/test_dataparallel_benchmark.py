"""benchmarks/advisor_dataparallel.py: DataParallel's step part by part, and its gap to DDP."""

from __future__ import annotations

import importlib.util
from pathlib import Path

_PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "advisor_dataparallel.py"
_spec = importlib.util.spec_from_file_location("advisor_dataparallel", _PATH)
dpb = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(dpb)


def test_table_has_each_part_and_the_gap_grows(capsys):
    assert dpb.main(["--model", "gpt-124m", "--global-batch", "64"]) == 0
    out = capsys.readouterr().out
    rows = [line.split("|")[1:-1] for line in out.splitlines() if line.startswith("| ") and line[2].isdigit()]
    assert [int(r[0]) for r in rows] == [2, 4, 8]
    ratios = [float(r[-1]) for r in rows]
    assert all(r > 1 for r in ratios) and ratios == sorted(ratios)
    assert "ASSUMED" in out  # no records: the host cost says it is assumed
