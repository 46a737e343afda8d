from __future__ import annotations

from gpucomm.cli import main


def test_report_prints_paths_and_exits_0(gpu_dir, tmp_path, capsys):
    assert main(["report", str(gpu_dir), "--out", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[:2] == [str(tmp_path / "report.md"), str(tmp_path / "report.html")]
    assert all((tmp_path / line).exists() for line in lines)


def test_bad_dir_is_one_line_and_exit_2(tmp_path, capsys):
    assert main(["report", str(tmp_path / "missing")]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and "missing" in err[0] and err[0].startswith("gpucomm report: error:")


def test_several_dirs_without_out_exit_2(gpu_dir, cpu_dir, capsys):
    assert main(["report", str(gpu_dir), str(cpu_dir)]) == 2
    assert "--out" in capsys.readouterr().err
