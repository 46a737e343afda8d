"""``gpucomm advise``: exit codes, JSON, records, calibration round trip."""

from __future__ import annotations

import json

import pytest

from gpucomm import records
from gpucomm.cli import main

from ._synthetic import SIZES, bench, env, train

BASE = ["advise", "--hardware", "h200-nvswitch", "--gpus", "8", "--model", "gpt-124m", "--global-batch", "256"]


@pytest.mark.parametrize("argv,match", [
    (["advise", "--hardware", "h900", "--model", "gpt-124m"], "no such profile"),
    (["advise", "--hardware", "cpu-gloo", "--model", "gpt-124m"], "only via --calibrate"),
    (["advise", "--hardware", "h200-nvswitch", "--model", "gpt-7t"], "not a built-in model"),
    (["advise", "--model", "gpt-124m"], "--hardware"),
    (["advise", "--hardware", "h200-nvswitch", "--gpus", "16", "--model", "mlp"], "--nodes"),
    (["advise", "--hardware", "h200-nvswitch", "--network", "tokenring", "--model", "mlp"], "--network"),
    (["advise", "--hardware", "h200-nvswitch", "--model", "mlp", "--strategies", "ddp,horovod"], "--strategies"),
    (["advise", "--hardware", "h200-nvswitch", "--model", "mlp", "--mfu", "1.5"], "--mfu"),
    (["advise", "--profile", "/nonexistent/p.json", "--model", "mlp"], "--profile"),
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
