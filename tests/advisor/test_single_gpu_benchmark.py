"""benchmarks/advisor_single_gpu.py: the user's loop and the advisor's CLI contract, on CPU at toy shapes."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest
import torch

_ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("advisor_single_gpu", _ROOT / "benchmarks" / "advisor_single_gpu.py")
bench = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = bench  # its dataclasses look their module up
_spec.loader.exec_module(bench)


@pytest.fixture(autouse=True)
def _inductor_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))  # per-op checkpointing sets it


def test_cpu_smoke_trains_both_families_and_prints_measured_beside_predicted(tmp_path, capsys):
    out = tmp_path / "r.txt"
    assert bench.main(["--cpu-smoke", "--out", str(out)]) == 0
    text = out.read_text()
    assert text == capsys.readouterr().out
    assert "command: python benchmarks/advisor_single_gpu.py --cpu-smoke" in text and "CPU SMOKE" in text
    for name in ("gpt-toy", "llama-toy"):
        row = next(line for line in text.splitlines() if line.startswith(f"| {name} |"))
        assert row.count("|") == 13 and " ms | " in row
    assert "step time: median |error|" in text and "the advisor's assumptions" in text
    moved = next(line for line in text.splitlines() if line.startswith("the host while each case's timed steps"))
    assert "gpt-toy " in moved and "llama-toy " in moved  # each case's spread (and steal where counted)
    side = json.loads(out.with_suffix(".json").read_text())
    assert all(r["spread"] >= 1 and (r["steal"] is None or 0 <= r["steal"] <= r["steal_most"] <= 1)
               for r in side["cases"])


def test_the_cases_span_what_the_issue_asks_and_stay_off_the_profile_grid():
    from gpucomm.advisor.compute import shapes

    cases = bench.CASES
    assert len(cases) >= 8 and {c.family for c in cases} == {"gpt", "llama"}
    assert {c.ac for c in cases} == {"none", "full", "op"} and {c.upcast for c in cases} == {True, False}
    assert min(c.seq for c in cases) == 1024 and max(c.seq for c in cases) == 8192
    assert min(c.mb for c in cases) == 1 and max(c.mb for c in cases) == 16
    grid = {(s.family, s.hidden, s.heads, s.kv_heads, s.ffn) for s in shapes.default_grid().layers}
    assert not any((c.family, c.hidden, c.heads, c.kv_heads, c.ffn) in grid for c in cases)
    sizes = []
    for c in cases:
        with torch.device("meta"):
            sizes.append(sum(p.numel() for p in bench.Model(c).parameters()))
    assert 1e8 <= min(sizes) and max(sizes) <= 3e9


def test_a_checkpointed_model_gives_the_plain_models_gradients():
    c = bench.SMOKE[1]
    torch.manual_seed(0)
    plain = bench.Model(bench.Case(**{**c.__dict__, "ac": "none"}))
    ckpt = bench.Model(c)
    ckpt.load_state_dict(plain.state_dict())
    idx = torch.randint(0, c.vocab, (2, c.seq))
    for m in (plain, ckpt):
        m(idx).float().square().mean().backward()
    for a, b in zip(plain.parameters(), ckpt.parameters(), strict=True):
        torch.testing.assert_close(a.grad, b.grad)


_H200 = _ROOT / "benchmarks" / "results" / "advisor-single-gpu_h200x1_2026-12-04.txt"


def test_repredict_reads_the_committed_h200_measurements_and_predicts_them_again(tmp_path, capsys):
    got = bench.read_measured(str(_H200))
    m, then = got["llama-2.9b"]
    assert m.step_s == pytest.approx(0.4692) and m.reserved == int(57.1 * bench.GiB)
    assert then["step_time_s"] == pytest.approx(0.4661)
    out = tmp_path / "re.txt"
    assert bench.main(["--repredict", str(_H200), "--only", "llama-160m", "gpt-1.3b", "--out", str(out)]) == 0
    text = out.read_text()
    assert "(predicted again)" in text and "not re-run" in text
    row = next(line for line in text.splitlines() if line.startswith("| gpt-1.3b |"))
    assert "| 152.8 ms |" in row and "| +23.8% |" in row  # measured, and the error printed then


def test_repredict_reads_the_json_sidecar_exactly(tmp_path):
    side = tmp_path / "r.json"
    side.write_text('{"kind": "advisor-single-gpu", "cases": [{"case": "gpt-350m", "step_s": 0.1, "allocated": 1, '
                    '"reserved": 2, "params": 3, "predicted": {"step_time_s": 0.2}}]}')
    m, then = bench.read_measured(str(side))["gpt-350m"]
    assert (m.step_s, m.allocated, m.reserved, m.params) == (0.1, 1, 2, 3) and then["step_time_s"] == 0.2


def test_repredict_of_a_file_without_known_cases_exits_2_naming_the_argument(tmp_path, capsys):
    bad = tmp_path / "x.txt"
    bad.write_text("| nothing | here |\n")
    assert bench.main(["--repredict", str(bad)]) == 2
    assert "--repredict" in capsys.readouterr().err
    assert bench.main(["--repredict", str(tmp_path / "missing.txt")]) == 2


def test_the_gpu_run_fits_its_time_budget_and_every_case_fits_the_h200():
    """The lead's GPU call (benchmarks/gpu/advisor_single.sh) has 150 s; the benchmark's budget is 90 s: the
    timed steps, as the advisor predicts them, take at most 60 s (model builds and warm-up syncs come on top),
    and every case fits an H200's 139.8 GiB with room (a case that runs out of memory loses the run)."""
    total = 0.0
    for c in bench.CASES:
        p = bench.predict(c, "h200-nvswitch")
        total += (bench.WARMUP + bench.TIMED) * p["step_time_s"]
        assert p["memory_reserved_bytes"] < 120 * bench.GiB, c.name
    assert total <= 60.0


def test_a_repredict_prices_the_host_the_earlier_run_read(tmp_path):
    """--repredict of a run that probed its host (--host this) prices that host again: the probe's readings are
    parsed from the run's report, and each family's ratio is the reading over the profile's host time a layer."""
    line = ("- host: this machine's (X), its host time scaled by what priced the profile's, timed again here on the "
            "NVIDIA H200: gpt 768-wide 1x4096 op steps of 2 and 8 layers: 7.60 ms a layer here (medians of 5), 6.84 "
            "ms in the profile (x1.11); llama 768-wide 1x4096 op steps of 2 and 8 layers: 13.04 ms a layer here")
    assert bench.host_readings(line) == {"gpt op": pytest.approx(0.0076), "llama op": pytest.approx(0.01304)}
    (tmp_path / "run.txt").write_text(line + "\n")
    (tmp_path / "run.json").write_text('{"cases": []}')
    assert bench.read_host(str(tmp_path / "run.json")) == bench.host_readings(line)  # from the report beside it
    (tmp_path / "run.json").write_text('{"cases": [], "host_here_s": {"gpt": 0.005}}')  # before modes were read
    assert bench.read_host(str(tmp_path / "run.json")) == {"gpt op": 0.005}
    assert bench.host_readings("- host: the profile's") == {}
    full = "gpt 768-wide 1x4096 full steps of 2 and 8 layers: 4.40 ms a layer here (medians of 5)"
    assert bench.host_readings(f"{line}; {full}")["gpt full"] == pytest.approx(0.0044)


def test_a_repredict_prices_each_modes_recorded_host(monkeypatch):
    """The recorded readings price each (family, mode) the profile's probe reads (profile.PROBED_MODES) over the
    profile's host time a layer of that mode; a reading of a mode the probe no longer reads (r20-r22 read full
    and none too) is left out, and every mode not read takes its family's op reading."""
    from gpucomm.advisor.compute import profile, source

    monkeypatch.setattr(source, "_this_host", source._this_host)
    src = profile.ProfileSource(source.shipped(source.SHIPPED["h200-nvswitch"]))
    there = {f"{f} {m}": t for (f, m), (_, _, t) in src.host_steps().items()}
    assert set(there) == {"gpt op", "llama op"}
    bench._price_recorded_host({"gpt op": 2 * there["gpt op"], "gpt full": 0.5})
    here = source._this_host(src)
    assert here.host_ratio("gpt", "op") == pytest.approx(2.0)
    assert here.host_ratio("gpt", "full") == pytest.approx(2.0)
    assert here.host_ratio("gpt", "selective") == pytest.approx(2.0)
    assert here.host_ratio("llama", "full") == 1.0


def test_the_host_around_the_cases_is_the_geometric_mean_of_the_two_probes():
    """The diagnosis line prices, per (family, mode) read by both probes, the geometric mean of the reading
    before the cases and the one after them; a key read once is left out (nothing brackets the cases)."""
    got = bench._around({"gpt op": 0.004, "llama op": 0.010, "gpt full": 0.003}, {"gpt op": 0.009, "llama op": 0.010})
    assert got == pytest.approx({"gpt op": 0.006, "llama op": 0.010})


@pytest.mark.skipif(torch.cuda.is_available(), reason="the child's refusal without the profile's GPU")
def test_the_probe_runs_in_a_child_process_and_its_failure_is_one_line():
    """The benchmark's --host this probe runs in a child process (its profiler passes stay out of the process
    that trains the cases); a child that cannot probe (no GPU of the profile's model here) is a RuntimeError
    naming the child and its last line of stderr."""
    with pytest.raises(RuntimeError, match=r"^the --host this probe \(child process\) exited 1: .*--host this"):
        bench._probe_in_child("h200-nvswitch")
