from __future__ import annotations

import pytest
from report_records import advice_rows, env, write

from gpucomm.cli import main


def test_report_prints_paths_and_exits_0(tmp_path, capsys):
    run = write(tmp_path / "run", env(), advice_rows())  # no plots: the CLI is under test, not drawing
    out = tmp_path / "out"
    assert main(["report", str(run), "--out", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[:2] == [str(out / "report.md"), str(out / "report.html")]
    assert " ".join(lines[2:]).startswith("Recommended for gpt2 (124M parameters, global batch 64) on 1 node × 8 GPUs")
    assert "zero1: reason text" in (out / "report.md").read_text()


def test_bad_dir_is_one_line_and_exit_2(tmp_path, capsys):
    assert main(["report", str(tmp_path / "missing")]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and "missing" in err[0] and err[0].startswith("gpucomm report: error:")


@pytest.mark.slow
def test_several_dirs_without_out_go_under_gpucomm_results(gpu_dir, cpu_dir, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["report", str(gpu_dir), str(cpu_dir)]) == 0
    (out,) = (tmp_path / "gpucomm-results").iterdir()
    assert out.name.startswith("report-") and (out / "report.md").is_file()
    assert str(out.relative_to(tmp_path) / "report.md") in capsys.readouterr().out


@pytest.mark.parametrize(("content", "what"), [
    (b"\x00\xff\xfe binary garbage\n", "not UTF-8"),
    (b'{"kind": "bench", "size": ' + b"9" * 5000 + b"}\n", "cannot be read"),
    (b"[" * 10_000 + b"]" * 10_000 + b"\n", "nested"),
])
def test_hostile_records_are_one_line_naming_file_and_line(tmp_path, capsys, content, what):
    src = tmp_path / "run"
    src.mkdir()
    write(src, env(), [])
    with open(src / "records.jsonl", "ab") as f:
        f.write(content + b'{"kind": "env"}\n')  # not the last line: no truncation excuse
    assert main(["report", str(src), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and what in err[0] and "records.jsonl:2:" in err[0], err
    assert "Traceback" not in err[0]
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_report_prints_its_findings_at_80_columns(gpu_dir, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["report", str(gpu_dir), "--out", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    answer = out.split("plots: ", 1)[1].split("\n", 1)[1]
    joined = " ".join(line.strip() for line in answer.splitlines())
    assert joined.startswith("answer: 33 rows, 1 WRONG (left out)")
    assert "gpucomm.comm vs torch.cuda.comm: faster at all_reduce 1.25x, all_gather 1.25x" in joined
    assert "Pick replicated for gpt-tiny on 2 GPUs" in joined and "Recommended for gpt2" in joined
    assert max(len(line) for line in answer.splitlines()) <= 80


def test_a_directory_without_result_rows_is_one_line_exit_2_and_nothing_written(tmp_path, capsys):
    empty = tmp_path / "nc"
    empty.mkdir()
    stopped = write(tmp_path / "stopped", env(), [])
    for d in (empty, stopped):
        before = sorted(p.name for p in d.iterdir())
        assert main(["report", str(d)]) == 2
        captured = capsys.readouterr()
        assert captured.out == "" and len(captured.err.strip().splitlines()) == 1
        assert captured.err.startswith("gpucomm report: error: ")
        assert sorted(p.name for p in d.iterdir()) == before


def test_a_results_root_is_several_runs_reported_side_by_side(tmp_path, capsys, monkeypatch):
    from report_records import bench, train_rows

    monkeypatch.chdir(tmp_path)
    root = tmp_path / "gpucomm-results"
    write(root / "bench-20261203-090000-1", env(), [bench("all_reduce", "torch.cuda.comm"),
                                                     bench(speedup=2.0, baseline="torch.cuda.comm")])
    write(root / "train-20261203-100000-2", env(), train_rows())
    write(root / "train-20261203-110000-3", env(), [])
    assert main(["report", "gpucomm-results"]) == 0
    out = capsys.readouterr().out
    (report,) = [p for p in root.iterdir() if p.name.startswith("report-")]
    assert f"{report.relative_to(tmp_path)}/report.md" in out.splitlines()[0]
    assert "skipped 1 result directory without result rows: gpucomm-results/train-20261203-110000-3" in out
    assert "run 1: " in out and "run 2: " in out
    assert "gpucomm.comm vs torch.cuda.comm: faster at all_reduce 2.00x" in out and "Pick replicated" in out
    assert not (root / "report.md").exists()
