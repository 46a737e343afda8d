"""benchmarks/advisor_reproduce.py: a profile calibrated from the committed H200 records gives them back."""

from __future__ import annotations

import importlib.util
from pathlib import Path

_ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("advisor_reproduce", _ROOT / "benchmarks" / "advisor_reproduce.py")
rep = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(rep)


def test_h200_records_are_reproduced_within_ten_percent(tmp_path, capsys):
    results = _ROOT / "benchmarks" / "results"
    dirs = [str(results / "train-host-r2_h200x1_2026-12-03"),
            *sorted(str(p) for p in (results / "advisor-records_h200x1_2026-12-02").iterdir())]
    out = tmp_path / "r.txt"
    assert rep.main(["--records", *dirs, "--out", str(out)]) == 0
    text = out.read_text()
    assert text == capsys.readouterr().out and "target every one within 10%: MET" in text
    # DataParallel's two replicas shared one H200 (cuda:0,cuda:0): priced as such, not left out
    assert "train dp gpt-124m x2 batch 16" in text and "; 0 left out" in text
