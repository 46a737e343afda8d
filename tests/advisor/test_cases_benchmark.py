"""benchmarks/advisor_cases.py: issue 11's cases, memory terms and the residual against the measurement."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

_PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "advisor_cases.py"
sys.path.insert(0, str(_PATH.parent))  # its sibling modules (_report)
_spec = importlib.util.spec_from_file_location("advisor_cases", _PATH)
cases = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cases)


def test_report_runs_every_case_and_states_the_residual(tmp_path, capsys):
    out = tmp_path / "cases.txt"
    assert cases.main(["--out", str(out)]) == 0
    text = out.read_text()
    assert text == capsys.readouterr().out
    assert "error:" not in text
    assert text.count("command: gpucomm advise") == len(cases.CASES)
    # the published 8B layout fits 80 GB under torchtitan's per-op policy, not under Megatron's selective
    op = text.split("tp=1 pp=1 cp=1 dp=8 shard=fsdp mb=2 ac=op vpp=1 |")[1]
    megatron = text.split("tp=1 pp=1 cp=1 dp=8 shard=fsdp mb=2 ac=selective vpp=1 |")[1]
    assert "fits True" in op.splitlines()[0] and "fits False" in megatron.splitlines()[0]
    assert text.count("vs 82.4 measured (torchtitan reports the reserved peak): residual") == 3
