from __future__ import annotations

import json
from pathlib import Path

import pytest
from report_records import bench, env, write

from gpucomm.records import RecordError
from gpucomm.report import build


@pytest.mark.slow
def test_build_writes_markdown_html_and_plots_into_the_result_dir(gpu_dir, gpu_report):
    assert gpu_report["markdown"] == gpu_dir / "report.md"
    assert gpu_report["html"] == gpu_dir / "report.html"
    plot_keys = {k for k in gpu_report if k.startswith("plots/")}
    stems = {k.rsplit(".", 1)[0] for k in plot_keys}
    assert stems == {"plots/headline_speedup", "plots/busbw_all_reduce", "plots/speedup_all_reduce", "plots/busbw_all_gather",
                     "plots/speedup_all_gather", "plots/train", "plots/scale"}
    assert {k.rsplit(".", 1)[1] for k in plot_keys} == {"png", "svg"}
    assert all(p.is_file() and p.stat().st_size > 0 for p in gpu_report.values())
    assert not list(gpu_dir.rglob(".*.tmp"))


def test_markdown_and_html_hold_the_measured_numbers(gpu_report):
    md = gpu_report["markdown"].read_text()
    page = gpu_report["html"].read_text()
    for text in ("123.46", "5 WRONG", "0.80x", "NVIDIA H200", "NCCL_NVLS_ENABLE", "2.28.9", "zero1: reason text"):
        assert text in md, text
        assert text in page, text


@pytest.mark.slow
def test_several_dirs_default_under_gpucomm_results(gpu_dir, cpu_dir, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    paths = build([gpu_dir, cpu_dir])
    assert paths["markdown"].parent.parent == Path("gpucomm-results")


@pytest.mark.slow
def test_report_files_are_not_written_through_planted_symlinks(tmp_path, gpu_dir):
    out = tmp_path / "out"
    out.mkdir()
    victim = tmp_path / "victim"
    victim.write_text("keep me")
    for name in ("report.md", ".report.md.tmp", "report.html", ".report.html.tmp"):
        (out / name).symlink_to(victim)
    paths = build(gpu_dir, out)
    assert victim.read_text() == "keep me"
    assert not paths["markdown"].is_symlink() and paths["markdown"].read_text().startswith("#")
    assert not [p for p in out.iterdir() if p.name.endswith(".tmp") and not p.is_symlink()]


def test_missing_dir_raises_and_writes_nothing(tmp_path):
    with pytest.raises(RecordError, match="does not exist"):
        build(tmp_path / "nope", tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_bad_record_writes_nothing(tmp_path):
    d = write(tmp_path / "run", env(), [bench()])
    with open(d / "records.jsonl", "a") as f:
        f.write(json.dumps({"kind": "bench", "schema_version": 1, "op": "all_reduce"}) + "\n")
        f.write(json.dumps({"kind": "bench", "schema_version": 1}) + "\n")
    with pytest.raises(RecordError, match="records.jsonl:3"):
        build(d)
    assert not (d / "report.md").exists() and not (d / "report.html").exists()


def test_an_env_only_dir_is_refused_and_nothing_is_written(tmp_path):
    d = write(tmp_path / "stopped", env(), [])
    before = sorted(p.name for p in d.iterdir())
    with pytest.raises(RecordError, match="holds only an env block"):
        build(d)
    assert sorted(p.name for p in d.iterdir()) == before


def test_a_report_of_the_runs_below_a_directory_goes_to_a_new_report_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    root = tmp_path / "gpucomm-results"
    write(root / "bench-20261203-090000-1", env(), [bench()])
    write(root / "bench-20261203-100000-2", env(), [bench()])
    paths = build(root)
    out = paths["markdown"].parent
    assert out.resolve().parent == root.resolve() and out.name.startswith("report-")  # the naming scheme
    assert not (root / "report.md").exists()  # never into the directory that holds the runs
    md = paths["markdown"].read_text()
    assert "run 1:" in md and "run 2:" in md


def test_markdown_and_html_say_the_same_things(gpu_dir, gpu_report, monkeypatch):
    from markupsafe import escape as html_escape

    from gpucomm.report import content
    from gpucomm.report.document import Table
    from gpucomm.report.markdown import escape
    from gpucomm.report.runs import load_runs

    # the tables do not depend on the figures: skip drawing them again
    monkeypatch.setattr(content.plots, "bench_plots", lambda runs, op: [])
    monkeypatch.setattr(content.plots, "train_plot", lambda runs: None)
    monkeypatch.setattr(content.plots, "scale_plot", lambda runs: None)
    doc = content.document(load_runs([gpu_dir]))
    md = gpu_report["markdown"].read_text()
    page = gpu_report["html"].read_text()
    tables = [b for s in doc.sections for b in s.blocks if isinstance(b, Table)]
    assert len(tables) >= 7
    for table in tables:
        for cell in {c for row in table.rows for c in row if c}:
            assert escape(cell.replace("\n", " · ")) in md, cell  # a cell's second line: joined in Markdown
            assert all(str(html_escape(line)) in page for line in cell.split("\n")), cell
    for section in doc.sections:
        assert f"{'#' * section.level} {section.title}" in md
        assert f">{section.title}</h{section.level}>" in page
