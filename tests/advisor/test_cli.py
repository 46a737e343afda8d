"""``gpucomm advise``: exit codes, JSON, records, calibration round trip."""

from __future__ import annotations

import json

import pytest

from gpucomm import records
from gpucomm.advisor.layout import LAYOUT_KEYS
from gpucomm.cli import main

from ._synthetic import SIZES, bench, env, train

BASE = ["advise", "--hardware", "h200-nvswitch", "--gpus", "8", "--model", "gpt-124m", "--global-batch", "256"]


@pytest.mark.parametrize("argv,match", [
    (["advise", "--hardware", "h900", "--model", "gpt-124m"], "no such profile"),
    (["advise", "--hardware", "cpu-gloo", "--model", "gpt-124m"], "only via --calibrate"),
    (["advise", "--hardware", "h200-nvswitch", "--model", "gpt-7t"], "no such preset"),
    (["advise", "--model", "gpt-124m"], "--hardware"),
    (["advise", "--hardware", "h200-nvswitch", "--gpus", "16", "--model", "mlp"], "--nodes"),
    (["advise", "--hardware", "h200-nvswitch", "--network", "tokenring", "--model", "mlp"], "--network"),
    (["advise", "--hardware", "h200-nvswitch", "--model", "mlp", "--strategies", "ddp,horovod"], "--strategies"),
    (["advise", "--hardware", "h200-nvswitch", "--model", "mlp", "--mfu", "1.5"], "--mfu"),
    (["advise", "--profile", "/nonexistent/p.json", "--model", "mlp"], "--profile"),
    (["advise", "--hardware", "v100-dgx2h", "--model", "gpt3-175b", "--kernels", "cuda"], "--kernels 'cuda'"),
    (["advise", "--hardware", "h200-nvswitch", "--model", "gpt-124m", "--kernels", "unfused"], "--kernels"),
])
def test_usage_errors_exit_2_with_a_clear_message(argv, match, capsys):
    assert main(argv) == 2
    assert match in capsys.readouterr().err


def test_json_is_valid_and_names_every_strategy(capsys):
    assert main([*BASE, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert {r["strategy"] for r in data["advice"]} == {"dp", "replicated", "ddp", "zero1", "zero2", "zero3", "fsdp"}
    for row in data["advice"]:
        records.validate_row(row)
    assert [r["rank"] for r in data["advice"]][0] == 1
    assert any("MFU" in a for a in data["assumptions"])


def test_table_output_has_reasons(capsys):
    assert main(BASE) == 0
    out = capsys.readouterr().out
    assert "ddp" in out and "slower than" in out and "assumption" in out


def test_out_writes_valid_records_and_the_scale_plot(tmp_path, capsys):
    out = tmp_path / "advice"
    assert main([*BASE, "--scale", "--max-gpus", "32", "--strategies", "ddp,zero3,dp", "--out", str(out)]) == 0
    lines = (out / "records.jsonl").read_text().splitlines()
    assert json.loads(lines[0])["kind"] == "env"
    rs = records.load(out)
    assert len(rs.advice) == 3 and {r.strategy for r in rs.advice} == {"ddp", "zero3", "dp"}
    # 1..32 GPUs: ddp and zero3 at 6 counts; dp only on one machine (1..8 GPUs).
    assert len(rs.scale) == 6 + 6 + 4
    assert (out / "advise-scale.png").stat().st_size > 0 and (out / "advise-scale.svg").stat().st_size > 0


def test_calibrate_save_and_reuse_profile(tmp_path, capsys):
    run_dir = tmp_path / "bench"
    with records.RecordWriter(run_dir, env()) as w:
        for r in bench("all_reduce", 2, 40.0, 2.0, SIZES):
            w.write(r)
        w.write(train("single", "mlp", 1, 30.0, 64, 267280))
    prof = tmp_path / "cpu.json"
    assert main(["advise", "--calibrate", str(run_dir), "--save-profile", str(prof)]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["kind"] == "cpu-gloo" and summary["collective_fits"] >= 1
    assert main(["advise", "--profile", str(prof), "--gpus", "2", "--model", "mlp", "--global-batch", "64",
                 "--dtype", "fp32", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["calibrated"] and all(r["calibrated"] for r in data["advice"])
    dp = next(r for r in data["advice"] if r["strategy"] == "dp")
    assert dp["rank"] is None and "CUDA" in dp["reason"]


def test_custom_gpt_shape_counts_activations(capsys):
    argv = ["advise", "--hardware", "h100-nvswitch", "--layers", "32", "--d-model", "4096", "--seq-len", "2048",
            "--global-batch", "64", "--json", "--strategies", "ddp,fsdp"]
    assert main(argv) == 0
    rows = {r["strategy"]: r for r in json.loads(capsys.readouterr().out)["advice"]}
    # 32 layers of 12 d^2 + 13 d, plus 50304 x 4096 tokens and 2048 x 4096 positions: 6.66 B parameters.
    assert rows["ddp"]["params"] == 6_658_596_864 and rows["ddp"]["model"] == "gpt-L32-d4096"
    assert not rows["fsdp"]["fits"]  # 74 GiB of activations at 8 sequences of 2048 per GPU
    assert main(["advise", "--hardware", "h100-nvswitch", "--layers", "32", "--model", "mlp"]) == 2
    assert "--d-model" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------- planner
PLAN = ["advise", "--hardware", "a100-nvlink3", "--nodes", "8", "--gpus", "8", "--model", "llama3-70b",
        "--global-batch", "64"]
_ROW_KEYS = {"layout", "tokens_per_s_per_gpu", "step_time_s", "memory_per_gpu_bytes", "memory_capacity_bytes",
             "fits", "mfu", "reason"}


def test_planner_json_contract(capsys):
    assert main([*PLAN, "--layout", "shard=fsdp,ac=full", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["advice"]
    assert rows and rows[0]["rank"] == 1
    for row in rows:
        assert _ROW_KEYS <= set(row)
        assert set(row["layout"]) == set(LAYOUT_KEYS)
        assert row["layout"]["shard"] == "fsdp" and row["layout"]["ac"] == "full"
        allocated = [row[f"memory_{k}_bytes"] for k in ("params", "grads", "optimizer", "activations", "logits",
                                                         "autocast", "buffers")]
        assert abs(sum(allocated) - row["memory_allocated_bytes"]) <= len(allocated)
        assert row["memory_reserved_bytes"] == row["memory_allocated_bytes"] + row["memory_margin_bytes"]
        assert abs(row["memory_reserved_bytes"] + row["memory_reserve_bytes"] - row["memory_per_gpu_bytes"]) <= 2
        records.validate_row(row)
    tps = [r["tokens_per_s_per_gpu"] for r in rows[1:]]
    assert tps == sorted(tps, reverse=True)


def test_issue_case_70b_on_64_a100_is_feasible(capsys):
    # issue 11, case 2: torchtitan's FSDP2 + full AC run; the advisor used to call every strategy infeasible
    assert main([*PLAN, "--layout", "tp=1,pp=1,cp=1,dp=64,shard=fsdp,mb=1,ac=full", "--json"]) == 0
    row = json.loads(capsys.readouterr().out)["advice"][0]
    assert row["fits"] and row["memory_per_gpu_bytes"] < row["memory_capacity_bytes"]


def test_issue_case_8b_with_torchtitans_selective_fits_80gb(capsys):
    # issue 11, case 1: torchtitan's "selective" is its per-op policy (ac=op); Megatron's keeps far more
    argv = ["advise", "--model", "llama3-8b", "--hardware", "h100-nvswitch", "--gpus", "8", "--global-batch", "16",
            "--json", "--layout"]
    assert main([*argv, "tp=1,pp=1,cp=1,dp=8,shard=fsdp,mb=2,ac=op"]) == 0
    op = json.loads(capsys.readouterr().out)["advice"][0]
    assert main([*argv, "tp=1,pp=1,cp=1,dp=8,shard=fsdp,mb=2,ac=selective"]) == 0
    sel = json.loads(capsys.readouterr().out)["advice"][0]
    assert op["layout"]["ac"] == "op" and op["fits"] and not sel["fits"]
    assert op["memory_activations_bytes"] < sel["memory_activations_bytes"]
    assert op["tokens_per_s_per_gpu"] < sel["tokens_per_s_per_gpu"]  # it recomputes a third of the matmuls


def test_arch_is_the_same_model_as_the_preset(capsys):
    arch = "layers=80,hidden=8192,heads=64,kv_heads=8,ffn=28672,vocab=128256,seq=8192"
    argv = [a for a in PLAN if a not in ("--model", "llama3-70b")]
    assert main([*argv, "--arch", arch, "--layout", "shard=fsdp,ac=full,mb=1", "--json"]) == 0
    a = json.loads(capsys.readouterr().out)["advice"][0]
    assert main([*PLAN, "--layout", "shard=fsdp,ac=full,mb=1", "--json"]) == 0
    b = json.loads(capsys.readouterr().out)["advice"][0]
    assert a["params"] == b["params"] and a["tokens_per_s_per_gpu"] == b["tokens_per_s_per_gpu"]


def test_list_hardware_lists_every_profile_with_sources(capsys):
    from gpucomm.advisor import hardware

    assert main(["advise", "--list-hardware"]) == 0
    out = capsys.readouterr().out
    for name in hardware.PROFILES:
        assert name in out
    assert "GiB usable" in out and "ib-ndr400x8" in out


@pytest.mark.parametrize("extra, words", [
    (["--layout", "tp=3"], ["tp=3", "64 attention heads"]),
    (["--layout", "tp=16"], ["tp=16", "exceeds"]),
    (["--layout", "tp=8,pp=2,dp=8"], ["dp*tp*pp*cp", "64 GPUs"]),
    (["--layout", "dp=64,mb=3"], ["mb=3", "per-replica batch 1"]),
    (["--layout", "bogus=1"], ["bogus", "known keys"]),
    (["--layout", "shard=zero9"], ["zero9"]),
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
    assert main([*BASE[:-2], "--global-batch", "100"]) == 2
    assert "--global-batch 100" in capsys.readouterr().err


def test_save_profile_under_a_regular_file_is_one_line(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert main([*BASE, "--save-profile", str(blocker / "p.json")]) == 2
    err = capsys.readouterr().err.strip()
    assert "--save-profile" in err and "\n" not in err


def test_planner_rows_render_at_80_columns(capsys):
    import io

    from rich.console import Console

    from gpucomm.advisor.cli import _plan_rows, _planner_job, config_from_args
    from gpucomm.advisor.search import search
    from gpucomm.cli import build_parser
    from gpucomm.report.terminal import advice_table

    args = build_parser().parse_args(PLAN)
    cfg = config_from_args(args)
    cfg.gpus = 8
    from gpucomm.advisor import hardware

    job, _ = _planner_job(cfg, hardware.get("a100-nvlink3"))
    rows = _plan_rows(search(job, {"shard": "fsdp"}, top=5), job, hardware.get("a100-nvlink3"))
    for width in (80, 120):
        buf = io.StringIO()
        Console(file=buf, width=width).print(advice_table(rows))
        assert all(len(line) <= width for line in buf.getvalue().splitlines())


def test_planner_efficiency_is_calibrated_from_train_records():
    import dataclasses

    from gpucomm import models
    from gpucomm.advisor import calibrate, hardware, timing
    from gpucomm.advisor.cli import _calibrated_efficiency
    from gpucomm.advisor.layout import Layout

    from ._synthetic import results, train

    arch = models.get("gpt-124m")
    prof = hardware.get("h200-nvswitch")
    # a measured step twice as long as the default predicts: the calibrated efficiency is about half
    pred = timing.step_time(arch, Layout(mb=16), prof, global_batch=16, seq=1024, gpus_per_node=1).step_s
    row = dataclasses.replace(train("single", "gpt-124m", 1, 2e3 * pred, 16, arch.params(), 1024),
                              device_type="cuda", precision="bf16")
    cal = calibrate.calibrate(results(train_rows=[row]), "h200-nvswitch")
    eff, how = _calibrated_efficiency(cal)
    assert eff == pytest.approx(prof.gemm_efficiency / 2, rel=0.02) and "calibrated" in how
    assert _calibrated_efficiency(prof) == (None, "")


def test_kernels_unfused_is_slower_and_says_so(capsys):
    argv = ["advise", "--arch", "layers=40,hidden=1536,heads=16,vocab=51200,seq=1024", "--hardware", "v100-dgx2h",
            "--gpus", "1", "--global-batch", "8", "--dtype", "fp16", "--layout",
            "tp=1,pp=1,cp=1,dp=1,shard=none,mb=8,ac=full", "--json", "--top", "1"]
    assert main(argv) == 0
    fused = json.loads(capsys.readouterr().out)
    assert main([*argv, "--kernels", "unfused"]) == 0
    unfused = json.loads(capsys.readouterr().out)
    assert unfused["advice"][0]["step_time_s"] > fused["advice"][0]["step_time_s"]
    assert any("--kernels unfused" in a for a in unfused["assumptions"])
    assert any("--kernels fused" in a for a in fused["assumptions"])
