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
