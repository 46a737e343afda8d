"""benchmarks/advisor_host_rule.py and advisor_host_range.py: the rules and the ranges they price, by hand (their
reports come from committed GPU runs: benchmarks/results/advisor-host-{rule,range}_cpu_*.txt)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

_ROOT = Path(__file__).resolve().parents[2]


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, _ROOT / "benchmarks" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


rule, ranged = _load("advisor_host_rule"), _load("advisor_host_range")


def test_each_rule_gives_both_families_the_reading_it_names():
    got = rule.ratios_by_rule(1.44, 1.21)
    assert got["family"] == (1.44, 1.21) and got["gpt"] == (1.44, 1.44) and got["llama"] == (1.21, 1.21)
    assert got["geo"] == (pytest.approx(1.32), pytest.approx(1.32)) and got["profile"] == (1.0, 1.0)
    assert set(got) == set(rule.RULES)


def test_the_round_ranges_are_read_from_the_probe_line_before_the_cases():
    report = ("| gpt-toy | ... |\nhost probe again after the cases: gpt op x1.38\n\nthe advisor's assumptions, as it "
              "printed them:\n- host: ...: gpt 768-wide 1x4096 op steps of 2 and 8 layers: 7.64 ms a layer here "
              "(medians of 5; one round's 6.75-8.17), 5.52 ms in the profile (x1.39); llama 768-wide 1x4096 op "
              "steps of 2 and 8 layers: 13.58 ms a layer here (medians of 5; one round's 11.66-14.71), 8.36 ms")
    assert ranged.round_ranges(report) == {"gpt": (pytest.approx(6.75e-3), pytest.approx(8.17e-3)),
                                           "llama": (pytest.approx(11.66e-3), pytest.approx(14.71e-3))}
    assert ranged.round_ranges("no probe here") == {}


@pytest.mark.parametrize("script", ["rule", "range"])
def test_a_run_that_is_not_a_sidecar_is_one_line_and_exit_2(tmp_path, capsys, script):
    mod, out = (rule if script == "rule" else ranged), tmp_path / "r.txt"
    (tmp_path / "foreign.json").write_text('{"kind": "something else"}')
    (tmp_path / "foreign.txt").write_text("a report")  # the range reads the report beside the sidecar
    for run, said in ((tmp_path / "missing.json", "(no such file)"), (tmp_path / "foreign.json", "(not an "
                      "advisor_single_gpu.py sidecar)"), (tmp_path / "r.txt", "(not a .json sidecar)")):
        assert mod.main(["--out", str(out), str(run)]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith(f"advisor_host_{script}: error: runs: expected") and said in err and "\n" not in err
        assert not out.exists()
