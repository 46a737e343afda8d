"""``gpucomm advise``: exit codes, one-line errors, JSON and records, the answer, calibration round trip."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from gpucomm import records
from gpucomm.advisor.layout import LAYOUT_KEYS
from gpucomm.cli import main

from ._synthetic import SIZES, bench, env, train

BASE = ["advise", "--hardware", "h200-nvswitch", "--gpus", "8", "--model", "gpt-124m", "--global-batch", "256"]
PLAN = ["advise", "--hardware", "a100-nvlink3", "--nodes", "8", "--gpus", "8", "--model", "llama3-70b",
        "--global-batch", "64"]


@pytest.mark.parametrize("argv,match", [
    (["advise", "--hardware", "h900", "--model", "gpt-124m"], "no such profile"),
    (["advise", "--hardware", "cpu-gloo", "--model", "gpt-124m"], "only via --calibrate"),
    (["advise", "--hardware", "h200-nvswitch", "--model", "nosuch"], "--model 'nosuch'"),
    (["advise", "--hardware", "h200-nvswitch", "--model", "nosuch"], "gpt-124m, gpt-350m"),
    (["advise", "--model", "gpt-124m"], "--hardware"),
    (["advise", "--hardware", "h200-nvswitch", "--gpus", "16", "--model", "gpt-tiny"], "--nodes"),
    (["advise", "--hardware", "h200-nvswitch", "--network", "tokenring", "--model", "gpt-tiny"], "--network"),
    (["advise", "--hardware", "h200-nvswitch", "--model", "gpt-tiny", "--strategies", "ddp,horovod"],
     "--strategies"),
    (["advise", "--profile", "/nonexistent/p.json", "--model", "gpt-tiny"], "--profile"),
    (["advise", "--hardware", "v100-dgx2h", "--model", "gpt3-175b", "--kernels", "cuda"], "--kernels 'cuda'"),
    (["advise", "--hardware", "h200-nvswitch", "--model", "gpt-124m", "--loss", "chunky"], "--loss 'chunky'"),
    (["advise", "--hardware", "h200-nvswitch", "--model", "gpt-124m", "--weights", "fp8"], "--weights 'fp8'"),
    (["advise", "--hardware", "h200-nvswitch", "--model", "gpt-124m", "--dtype", "fp32", "--weights", "bf16"],
     "16-bit compute"),
    (["advise", "--hardware", "h200-nvswitch", "--params", "1e16"], "--params 1e+16"),
    (["advise", "--hardware", "h200-nvswitch", "--nodes", "200000", "--model", "gpt-124m"], "1,048,576 GPUs"),
    (["advise", "--hardware", "h200-nvswitch", "--layers", "4"], "--d-model"),
    (["advise", "--hardware", "h200-nvswitch", "--model", "gpt-124m", "--arch", "layers=2,hidden=64,heads=4"],
     "--model and --arch"),
    (["advise", "--hardware", "h200-nvswitch", "--model", "gpt-124m", "--host", "mine"], "--host 'mine'"),
])
def test_usage_errors_exit_2_with_one_line(argv, match, capsys):
    assert main(argv) == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert match in err and "\n" not in err and captured.out == "", err


def test_named_strategies_are_presets_priced_by_the_planner(capsys):
    assert main([*BASE, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    # zero2, zero3 priced the same as zero1, fsdp: shown once (search.distinct)
    assert {r["strategy"] for r in data["advice"]} == {"dp", "replicated", "ddp", "zero1", "fsdp"}
    for row in data["advice"]:
        records.validate_row(row)
        assert set(row["layout"]) == set(LAYOUT_KEYS) and row["layout"]["dp"] == 8 and row["layout"]["mb"] == 32
    ranked = [r for r in data["advice"] if r["rank"] is not None]
    assert ranked[0]["rank"] == 1 and data["answer"][0].startswith("answer: ")
    wrappers = {r["strategy"]: r["layout"]["wrapper"] for r in data["advice"]}
    assert wrappers["dp"] == "dataparallel" and wrappers["replicated"] == "replicated" and wrappers["ddp"] == "ddp"
    # ranked by predicted step time, except the simpler within 5% of the fastest
    times = [r["step_time_s"] for r in ranked[1:]]
    assert times == sorted(times)
    assert ranked[0]["step_time_s"] <= 1.05 * min(r["step_time_s"] for r in ranked)


def test_the_answer_ends_the_output_and_each_reason_has_its_own_time(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    assert main(BASE) == 0
    out = capsys.readouterr().out
    lines = out.rstrip().splitlines()
    start = max(i for i, line in enumerate(lines) if line.startswith("answer: "))
    tail = lines[start:]
    assert len(tail) <= 5 and any(line.startswith("why: ") for line in tail), tail
    assert "ddp" in tail[0] and " ms per step" in "\n".join(tail)
    assert all(len(line) <= 80 for line in lines)
    assert "report.md" not in out
    # "[n] name: <its own time> ..." for every row
    notes = [line for line in lines if line.startswith("[")]
    assert notes and all(" ms per step" in n or " s per step" in n for n in notes)


def test_out_writes_valid_records_and_the_scale_plot(tmp_path, capsys):
    out = tmp_path / "advice"
    assert main([*BASE, "--scale", "--max-gpus", "32", "--strategies", "ddp,zero3,dp", "--out", str(out)]) == 0
    lines = (out / "records.jsonl").read_text().splitlines()
    assert json.loads(lines[0])["kind"] == "env"
    printed = capsys.readouterr().out.rstrip().splitlines()
    said = json.loads(lines[0])["extra"]["advise"]["answer"]
    assert said[0].startswith("answer: ") and printed[-len(said):] == said  # recorded as printed, and printed last
    assert any(line.startswith(f"records: {out / 'records.jsonl'}") for line in printed)
    rs = records.load(out)
    assert len(rs.advice) == 3 and {r.strategy for r in rs.advice} == {"ddp", "zero3", "dp"}
    # 1..32 GPUs: ddp at 6 counts, zero3 from 2 GPUs (5); dp on one machine only, from 1 to 8 GPUs (4)
    assert len(rs.scale) == 6 + 5 + 4
    assert (out / "advise-scale.png").stat().st_size > 0 and (out / "advise-scale.svg").stat().st_size > 0


def test_out_alone_or_a_parent_of_runs_gets_a_new_advise_dir_and_the_report_says_its_answer(tmp_path, capsys,
                                                                                             monkeypatch):
    from gpucomm.report.findings import answer

    monkeypatch.chdir(tmp_path)
    assert main([*BASE, "--out"]) == 0
    (run,) = (tmp_path / "gpucomm-results").iterdir()
    assert run.name.startswith("advise-") and run.name.endswith(f"-{os.getpid()}")
    said = records.load(run).env[0].extra["advise"]["answer"]
    (line,) = answer(records.load(run))
    assert line.startswith("Recommended for gpt-124m") and said[0].removeprefix("answer: ") in line
    assert main([*BASE, "--out", "gpucomm-results"]) == 0  # a parent of runs: a new run inside it
    assert len(list((tmp_path / "gpucomm-results").iterdir())) == 2
    assert not (tmp_path / "gpucomm-results" / "records.jsonl").exists()


@pytest.mark.parametrize("bad", ["file", "file/sub", "locked/sub"])
def test_an_out_that_cannot_be_written_is_refused_before_any_work(tmp_path, capsys, bad):
    (tmp_path / "file").write_text("")
    (tmp_path / "locked").mkdir(mode=0o500)
    if bad.startswith("locked") and os.access(tmp_path / "locked", os.W_OK):  # root writes anywhere
        pytest.skip("running as root: no directory is unwritable")
    assert main([*BASE, "--out", str(tmp_path / bad)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "--out" in captured.err and "\n" not in captured.err.strip()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file", "locked"] and not any((tmp_path / "locked").iterdir())


@pytest.mark.slow
@pytest.mark.parametrize("cols", [80, 120])
def test_a_terminal_shows_the_answer_last_in_at_most_five_lines(tmp_path, cols):
    """In a real terminal (as the bench and train live-view tests do): nothing wider than the terminal, the
    answer last, within five screen lines, no mention of a report.md that was not written."""
    pytest.importorskip("pyte")
    from gpucomm.testing.terminal import run_in_pty, screen_lines

    src = Path(__file__).resolve().parents[2] / "src"
    env_vars = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "NO_COLOR", "FORCE_COLOR")}
    env_vars.update(TERM="xterm-256color", PYTHONPATH=str(src))
    argv = [sys.executable, "-m", "gpucomm", *PLAN, "--top", "5", "--out", str(tmp_path / "run")]
    code, data = run_in_pty(argv, cols, 40, env=env_vars)
    lines = screen_lines(data, cols, 40)
    while lines and not lines[-1]:
        lines.pop()
    text = "\n".join(lines)
    assert code == 0, text
    assert max(len(line) for line in lines) <= cols and "report.md" not in text
    start = max(i for i, line in enumerate(lines) if line.startswith("answer: "))
    said = records.load(tmp_path / "run").env[0].extra["advise"]["answer"]
    assert len(lines[start:]) <= 5 and any(line.startswith("records: ") for line in lines[:start]), text
    assert " ".join(" ".join(lines[start:]).split()).startswith(" ".join(said[0].split()[:3])), text
    assert any(line.startswith("why: ") for line in lines[start:]), text


def _cpu_run(tmp_path, with_bench=True):
    run_dir = tmp_path / "run"
    with records.RecordWriter(run_dir, env()) as w:
        if with_bench:
            for r in bench("all_reduce", 2, 40.0, 2.0, SIZES):
                w.write(r)
        w.write(train("single", "gpt-tiny", 1, 30.0, 32, 0, 32))
        w.write(train("ddp", "gpt-tiny", 2, 18.0, 32, 0, 32))
        w.write(train("replicated", "gpt-tiny", 2, 24.0, 32, 0, 32))
    return run_dir


@pytest.mark.parametrize("with_bench", [True, False])
def test_calibrated_advice_follows_what_was_measured(tmp_path, capsys, with_bench):
    """The issue's case: ddp measured faster than replicated must not be ranked below it, DataParallel on a CPU
    is left out with its reason, the profile's name is short, and no capacity is printed as 0.00 GiB."""
    run_dir = _cpu_run(tmp_path, with_bench)
    prof = tmp_path / "cpu.json"
    assert main(["advise", "--calibrate", str(run_dir), "--save-profile", str(prof), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["kind"] == "cpu-gloo" and summary["checked"] == summary["within_10pct"] == (12 if with_bench else 3)
    assert main(["advise", "--profile", str(prof), "--gpus", "2", "--model", "gpt-tiny", "--global-batch", "32",
                 "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    by = {r["strategy"]: r for r in data["advice"]}
    assert by["ddp"]["step_time_s"] == pytest.approx(0.018, rel=0.10)
    assert by["replicated"]["step_time_s"] == pytest.approx(0.024, rel=0.10)
    assert by["ddp"]["rank"] == 1 and by["ddp"]["rank"] < by["replicated"]["rank"]
    assert "dp" not in by and any(x["strategy"] == "dp" and "CUDA" in x["reason"] for x in data["left_out"])
    assert data["hardware"] == "cpu-gloo (calibrated)"
    assert main(["advise", "--profile", str(prof), "--gpus", "2", "--model", "gpt-tiny", "--global-batch", "32"]) == 0
    out = capsys.readouterr().out
    assert "0.00 GiB" not in out and "no device capacity" in out and "left out: dp" in out


def test_custom_gpt_shape_counts_activations(capsys):
    argv = ["advise", "--hardware", "h100-nvswitch", "--layers", "32", "--d-model", "4096", "--seq-len", "2048",
            "--global-batch", "64", "--json", "--strategies", "ddp,fsdp"]
    assert main(argv) == 0
    rows = {r["strategy"]: r for r in json.loads(capsys.readouterr().out)["advice"]}
    # 32 layers of 12 d^2 + 13 d, plus 50304 x 4096 tokens and 2048 x 4096 positions: 6.66 B parameters
    assert rows["ddp"]["params"] == 6_658_596_864 and rows["ddp"]["model"] == "gpt-L32-d4096"
    assert not rows["ddp"]["fits"]  # 16 B per parameter and DDP's gradient copy exceed 80 GB


def test_params_alone_gives_a_gpt3_shape_and_says_so(capsys):
    assert main(["advise", "--hardware", "h100-nvswitch", "--params", "7e9", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert any("GPT-3-family shape" in a for a in data["assumptions"])
    assert data["advice"][0]["params"] == pytest.approx(7e9, rel=0.15)


def test_planner_json_contract(capsys):
    assert main([*PLAN, "--layout", "shard=fsdp,ac=full", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["advice"]
    assert rows and rows[0]["rank"] == 1
    for row in rows:
        assert set(row["layout"]) == set(LAYOUT_KEYS)
        assert row["layout"]["shard"] == "fsdp" and row["layout"]["ac"] == "full"
        allocated = [row[f"memory_{k}_bytes"] for k in ("params", "grads", "optimizer", "activations", "logits",
                                                         "autocast", "buffers")]
        assert abs(sum(allocated) - row["memory_allocated_bytes"]) <= len(allocated)
        assert row["memory_reserved_bytes"] == row["memory_allocated_bytes"] + row["memory_margin_bytes"]
        assert abs(row["memory_reserved_bytes"] + row["memory_reserve_bytes"] - row["memory_per_gpu_bytes"]) <= 2
        records.validate_row(row)
    times = [r["step_time_s"] for r in rows[1:]]
    assert times == sorted(times)


def test_issue_case_70b_on_64_a100_is_feasible(capsys):
    assert main([*PLAN, "--layout", "tp=1,pp=1,cp=1,dp=64,shard=fsdp,mb=1,ac=full", "--json"]) == 0
    row = json.loads(capsys.readouterr().out)["advice"][0]
    assert row["fits"] and row["memory_per_gpu_bytes"] < row["memory_capacity_bytes"]


def test_arch_is_the_same_model_as_the_preset(capsys):
    arch = "layers=80,hidden=8192,heads=64,kv_heads=8,ffn=28672,vocab=128256,seq=8192"
    argv = [a for a in PLAN if a not in ("--model", "llama3-70b")]
    assert main([*argv, "--arch", arch, "--layout", "shard=fsdp,ac=full,mb=1", "--json"]) == 0
    a = json.loads(capsys.readouterr().out)["advice"][0]
    assert main([*PLAN, "--layout", "shard=fsdp,ac=full,mb=1", "--json"]) == 0
    b = json.loads(capsys.readouterr().out)["advice"][0]
    assert a["params"] == b["params"] and a["tokens_per_s_per_gpu"] == b["tokens_per_s_per_gpu"]


def test_list_hardware_lists_every_profile_with_public_sources(capsys, monkeypatch):
    from gpucomm.advisor import hardware

    monkeypatch.setenv("COLUMNS", "80")
    assert main(["advise", "--list-hardware"]) == 0
    out = capsys.readouterr().out
    assert max(len(line) for line in out.splitlines()) <= 80  # wrapped to COLUMNS, piped or not
    for name in hardware.PROFILES:
        assert name in out
    assert "GiB usable" in out and "ib-ndr400x8" in out
    assert "reference files" not in out and "collective-bench.md" not in out and ".md §" not in out


@pytest.mark.parametrize("extra, words", [
    (["--layout", "tp=3"], ["tp=3", "64 attention heads"]),
    (["--layout", "tp=16"], ["tp=16", "exceeds"]),
    (["--layout", "tp=8,pp=2,dp=8"], ["dp*tp*pp*cp", "64 GPUs"]),
    (["--layout", "dp=64,mb=3"], ["mb=3", "per-replica batch 1"]),
    (["--layout", "bogus=1"], ["bogus", "known keys"]),
    (["--layout", "shard=zero9"], ["zero9"]),
    (["--layout", "pp=4,stages=20+20+20+19"], ["sums to 79", "80 layers"]),
    (["--layout", "pp=4,vpp=3"], ["vpp=3", "20+20+20+20"]),
    (["--arch", "layers=2,hidden=64,heads=4,colour=red"], ["colour"]),
    (["--seq-len", "0"], ["--seq-len 0"]),
    (["--seq-len", "-5"], ["--seq-len -5"]),
    (["--dtype", "int3"], ["int3"]),
])
def test_planner_bad_input_is_one_line_exit_2(extra, words, capsys):
    argv = list(PLAN)
    if extra[0] == "--arch":
        argv = [a for a in PLAN if a not in ("--model", "llama3-70b")]
    assert main([*argv, *extra]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert err.count("\n") == 0 and all(w in err for w in words), err
    assert captured.out == "" and "Traceback" not in err


def test_global_batch_that_does_not_divide(capsys):
    assert main([*PLAN[:-2], "--global-batch", "100", "--layout", "dp=64"]) == 2
    assert "--global-batch 100" in capsys.readouterr().err
    assert main([*BASE[:-2], "--global-batch", "100", "--json"]) == 2
    assert "--global-batch 100" in capsys.readouterr().err


def test_save_profile_under_a_regular_file_is_one_line(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert main([*BASE, "--save-profile", str(blocker / "p.json")]) == 2
    err = capsys.readouterr().err.strip()
    assert "--save-profile" in err and "\n" not in err


def test_kernels_unfused_is_slower_and_says_so(capsys):
    argv = ["advise", "--arch", "layers=40,hidden=1536,heads=16,vocab=51200,seq=1024", "--hardware", "v100-dgx2h",
            "--gpus", "1", "--global-batch", "8", "--dtype", "fp16", "--weights", "fp16", "--layout",
            "tp=1,pp=1,cp=1,dp=1,shard=none,mb=8,ac=full", "--json", "--top", "1"]
    assert main(argv) == 0
    fused = json.loads(capsys.readouterr().out)
    assert main([*argv, "--kernels", "unfused"]) == 0
    unfused = json.loads(capsys.readouterr().out)
    assert unfused["advice"][0]["step_time_s"] > fused["advice"][0]["step_time_s"]
    assert any("kernels unfused" in a for a in unfused["assumptions"])
    assert any("kernels fused" in a for a in fused["assumptions"])


def test_scale_to_16384_gpus_and_absurd_workloads_are_answered(capsys):
    assert main(["advise", "--hardware", "h200-nvswitch", "--model", "gpt-350m", "--scale", "--max-gpus", "16384",
                 "--json"]) == 0
    scale = json.loads(capsys.readouterr().out)["scale"]
    assert max(p["gpus"] for p in scale) == 16384 and len(scale) <= 15 * 7  # 1, 2, 4 ... 16384, per strategy
    assert main(["advise", "--hardware", "h200-nvswitch", "--params", "1e15", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["answer"][0].startswith("answer: nothing fits")


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="a machine with a GPU may have the profile's")
def test_host_this_without_the_profiles_gpu_is_refused_in_one_line(capsys):
    argv = ["advise", "--hardware", "h200-nvswitch", "--model", "gpt-124m", "--host", "this"]
    assert main(argv) == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert err.startswith("gpucomm advise: error: --host this:") and "\n" not in err and captured.out == "", err
