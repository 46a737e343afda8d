"""``gpucomm report --doc`` and ``python -m gpucomm.report.docs``: exit status 0, 1 (stale), 2 (bad input)."""

from __future__ import annotations

import subprocess
import sys

from gpucomm.cli import main
from gpucomm.report.docs import cli

MARK = ("<!-- generated: ceilings from benchmarks/results/ceilings_x_2026-12-03.jsonl -->\n"
        "<!-- end generated -->\n")


def test_doc_check_exit_status(repo, capsys):
    doc = repo("# t\n\n" + MARK)
    assert main(["report", "--doc", str(doc), "--check"]) == 1
    assert "is stale" in capsys.readouterr().err
    assert main(["report", "--doc", str(doc)]) == 0
    assert capsys.readouterr().out == f"regenerated {doc}\n"
    assert main(["report", "--doc", str(doc), "--check"]) == 0


def test_a_missing_target_or_a_bad_marker_is_one_line_and_exit_2(repo, tmp_path, capsys):
    assert cli.run(tmp_path / "nosuch") == 2
    assert capsys.readouterr().err.count("\n") == 1
    assert cli.run(repo(MARK.replace("ceilings from", "nope from"))) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unknown block kind 'nope'" in err


def test_kinds_lists_every_kind_with_what_it_reads(capsys):
    assert cli.main(["--kinds"]) == 0
    out = capsys.readouterr().out
    assert "bench-pairs" in out and "gpucomm bench directory" in out


def test_python_dash_m_runs_the_same_command():
    proc = subprocess.run([sys.executable, "-m", "gpucomm.report.docs", "--kinds"], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0 and "train-host" in proc.stdout
