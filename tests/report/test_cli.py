from __future__ import annotations

from report_records import advice_rows, env, write

from gpucomm.cli import main


def test_report_prints_paths_and_exits_0(tmp_path, capsys):
    run = write(tmp_path / "run", env(), advice_rows())  # no plots: the CLI is under test, not drawing
    out = tmp_path / "out"
    assert main(["report", str(run), "--out", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines == [str(out / "report.md"), str(out / "report.html")]
    assert "zero1: reason text" in (out / "report.md").read_text()


def test_bad_dir_is_one_line_and_exit_2(tmp_path, capsys):
    assert main(["report", str(tmp_path / "missing")]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and "missing" in err[0] and err[0].startswith("gpucomm report: error:")


def test_several_dirs_without_out_exit_2(gpu_dir, cpu_dir, capsys):
    assert main(["report", str(gpu_dir), str(cpu_dir)]) == 2
    assert "--out" in capsys.readouterr().err
