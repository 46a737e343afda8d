"""benchmarks/parallel_vs_dataparallel.py in its CPU smoke form: both parts, the summary and the file.

Checks the output's form and the loss comparison only (CPU timings on a shared machine say nothing).
"""

import importlib.util
import re
import sys
from pathlib import Path

import pytest
import torch

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "parallel_vs_dataparallel.py"


def _bench():
    spec = importlib.util.spec_from_file_location("parallel_vs_dataparallel_bench", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU form")
def test_cpu_smoke_form_writes_both_parts_and_the_summary(tmp_path, capsys):
    flags = ["--device", "cpu", "--model", "gpt-tiny", "--batch", "3", "--steps", "2", "--warmup", "1",
             "--rounds", "2", "--out", str(tmp_path)]
    assert _bench().main(flags) == 0
    printed = capsys.readouterr().out
    path = next(tmp_path.glob("parallel-vs-dataparallel_cpu_*.txt"))
    text = path.read_text()
    assert text in printed and f"wrote {path}" in printed
    assert "# command: python benchmarks/parallel_vs_dataparallel.py --device cpu --model gpt-tiny" in text
    assert "CPU numbers" in text and "ONLY HOST COSTS ARE MEANINGFUL HERE" in text
    part1 = re.findall(r"^\s+(\d) (plain|eager)\s+([\d.]+)\s+n/a", text, re.M)
    assert sorted((r, s) for r, s, _ in part1) == [("0", "eager"), ("0", "plain"), ("1", "eager"), ("1", "plain")]
    assert re.search(r"^one device: eager / plain step time: [\d.]+ \(target <= 1\.0200\) (met|MISSED)$", text, re.M)
    assert "repeated device: graphs launch / GPU time per replica-step: not measured here" in text
    phases = re.findall(r"^# round (\d) eager: launch ms per replica-step by phase \(medians\): (.*)$", text, re.M)
    assert [r for r, _ in phases] == ["0", "1"]
    for _, line in phases:  # each phase once, the loop's and the library's (all_reduce, inside backward)
        names = [item.split()[0] for item in line.split(", ")]
        assert names == ["forward", "backward", "all_reduce", "optimizer", "outside"]
    assert re.search(r"^losses: worst step-wise relative difference [\d.e+-]+ \(tolerance 1e-05\) equal$", text, re.M)


def test_bad_flags_are_usage_errors(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        _bench().main(["--device", "cpu", "--replicas", "1", "--out", str(tmp_path / "x")])
    assert exc.value.code == 2 and "--replicas: expected an integer >= 2" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()
