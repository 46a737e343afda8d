"""``gpucomm measure`` end to end on CPU, and its usage errors (exit 2, nothing written)."""

import pytest

from gpucomm import cli
from gpucomm.advisor.compute import profile


def test_measure_writes_a_cpu_profile_the_loader_reads(tmp_path, capsys):
    out = tmp_path / "new" / "cpu.json"  # a missing directory is created
    assert cli.main(["measure", "--device", "cpu", "--out", str(out)]) == 0
    p = profile.load(out)
    assert p.cpu and p.grid == "tiny (CPU)" and p.env["command"] and p.env["versions"]["torch"]
    assert all(p.points[k] for k in profile.POINT_KINDS)
    said = capsys.readouterr().out
    assert f"wrote {out}: cpu (CPU profile), eager, fp32" in said
    assert p.device["step_rounds"] == 5 and "whole steps: each the median of 5 interleaved rounds" in said


def test_step_rounds_1_times_each_whole_step_once(tmp_path, capsys):
    out = tmp_path / "cpu.json"
    assert cli.main(["measure", "--device", "cpu", "--step-rounds", "1", "--out", str(out)]) == 0
    assert profile.load(out).device["step_rounds"] == 1 and "interleaved rounds" not in capsys.readouterr().out


def test_merge_measures_only_the_points_a_profile_lacks_and_adds_them(tmp_path, capsys):
    full = tmp_path / "cpu.json"
    assert cli.main(["measure", "--device", "cpu", "--out", str(full)]) == 0
    p = profile.load(full)
    steps = p.points["step"]
    p.points["step"] = []  # a profile measured before the grid had whole steps
    old = tmp_path / "old.json"
    profile.save(p, old)
    merged = tmp_path / "merged.json"
    capsys.readouterr()
    assert cli.main(["measure", "--device", "cpu", "--merge", str(old), "--out", str(merged)]) == 0
    q = profile.load(merged)
    assert len(q.points["step"]) == len(steps) and q.points["layer"] == p.points["layer"]  # the rest untouched
    assert q.device["merges"][-1]["points"] == {"step": len(steps)} and q.env == p.env
    assert f"{len(steps)} points added to {old}'s" in capsys.readouterr().out
    # nothing lacking: nothing measured, the profile written as it was
    assert cli.main(["measure", "--device", "cpu", "--merge", str(merged), "--out", str(tmp_path / "again.json")]) == 0
    assert profile.load(tmp_path / "again.json").points == q.points


def test_an_interrupted_merge_says_so_in_its_run_and_fills_no_more_busy_times(tmp_path, monkeypatch):
    """A merge whose measuring (or whose busy pass) was interrupted records that in its run under
    ``device["merges"]``, and does not go on to fill the busy times of the older points."""
    from gpucomm.advisor.compute import measure

    full = tmp_path / "cpu.json"
    assert cli.main(["measure", "--device", "cpu", "--out", str(full)]) == 0
    p = profile.load(full)
    p.points["step"] = []
    old = tmp_path / "old.json"
    profile.save(p, old)
    real, filled = measure.measure, []

    def busy_stopped(*a, **k):
        got = real(*a, **k)
        got.device["busy_interrupted"] = True  # as a Ctrl-C during measure's own busy pass leaves it
        filled.clear()
        return got

    monkeypatch.setattr(measure, "measure", busy_stopped)
    monkeypatch.setattr(measure, "fill_busy", lambda prof, *a, **k: (filled.append(prof), (prof.points, 0, True))[1])
    merged = tmp_path / "merged.json"
    assert cli.main(["measure", "--device", "cpu", "--merge", str(old), "--out", str(merged)]) == 0
    assert profile.load(merged).device["merges"][-1]["busy_interrupted"] is True
    assert filled == []  # the older points' busy times are not filled after the interrupt


def test_a_merge_that_completes_an_interrupted_run_clears_its_flags(tmp_path):
    """An interrupted run (points or busy times missing) completed by a merge is a whole profile: the flags leave
    the device block and are kept, as what the merge completed, in its run under ``device["merges"]``."""
    full = tmp_path / "cpu.json"
    assert cli.main(["measure", "--device", "cpu", "--out", str(full)]) == 0
    p = profile.load(full)
    p.points["step"] = p.points["step"][:1]  # as a SIGTERM during the steps leaves it
    p.device["interrupted"] = "after 40 of 48 points"
    old = tmp_path / "old.json"
    profile.save(p, old)
    merged = tmp_path / "merged.json"
    assert cli.main(["measure", "--device", "cpu", "--merge", str(old), "--out", str(merged)]) == 0
    q = profile.load(merged)
    assert "interrupted" not in q.device and "busy_interrupted" not in q.device
    assert q.device["merges"][-1]["completed"] == {"interrupted": "after 40 of 48 points"}
    assert len(q.points["step"]) == len(profile.load(full).points["step"])


def test_a_merge_completing_an_interrupted_run_reads_the_busy_times_its_own_pass_would_have(tmp_path, monkeypatch):
    """An interrupted run completed by a merge gets the busy times of every kind measure's own pass reads, whole
    steps among them (the r27 profile's 67 steps had none: its merge read only the lookups' kinds); a merge into
    a whole profile reads only those (FILL_KINDS, the default)."""
    from gpucomm.advisor.compute import measure

    full = tmp_path / "cpu.json"
    assert cli.main(["measure", "--device", "cpu", "--out", str(full)]) == 0
    asked = []
    monkeypatch.setattr(measure, "fill_busy", lambda prof, *a, **k: (asked.append(k.get("kinds", ())),
                                                                      (prof.points, 0, True))[1])
    assert cli.main(["measure", "--device", "cpu", "--merge", str(full), "--out", str(tmp_path / "a.json")]) == 0
    assert asked[-1] == ()  # the merge's fill (the run's own measure, of no new point, asked before it)
    p = profile.load(full)
    p.device["busy_interrupted"] = True
    old = tmp_path / "old.json"
    profile.save(p, old)
    assert cli.main(["measure", "--device", "cpu", "--merge", str(old), "--out", str(tmp_path / "b.json")]) == 0
    assert asked[-1] == measure.BUSY_KINDS and "step" in measure.BUSY_KINDS
    assert set(measure.FILL_KINDS) < set(measure.BUSY_KINDS)


def test_merge_refuses_a_profile_measured_another_way(tmp_path, capsys):
    path = tmp_path / "cpu.json"
    assert cli.main(["measure", "--device", "cpu", "--out", str(path)]) == 0
    capsys.readouterr()
    out = tmp_path / "m.json"
    assert cli.main(["measure", "--device", "cpu", "--precision", "bf16", "--merge", str(path), "--out",
                     str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert "--merge" in err and "precision is fp32, this run's bf16" in err and "\n" not in err
    assert not out.exists()


@pytest.mark.parametrize("argv, words", [
    (["--software", "fused"], "--software 'fused': fused is derived from an eager profile"),
    (["--software", "jit"], "--software 'jit': use eager or compiled"),
    (["--precision", "fp8"], "--precision 'fp8': expected bf16 or fp32"),
    (["--model", "nosuch"], "model 'nosuch': no such preset"),
    (["--arch", "layers=2"], "--arch: missing hidden, heads"),
    (["--seq", "1024"], "--seq goes with --model or --arch"),
    (["--model", "gpt-124m", "--seq", "x"], "--seq 'x': expected comma-separated integers"),
    (["--device", "tpu"], "--device 'tpu': expected cuda, cuda:N or cpu"),
    (["--device", "cuda:7"], "--device cuda:7:"),
    (["--step-rounds", "0"], "--step-rounds 0: expected a whole number of rounds, 1 or more"),
    ([], "--out FILE is required"),
])
def test_usage_errors_are_one_line_exit_2_and_write_nothing(tmp_path, capsys, argv, words):
    out = tmp_path / "p.json"
    extra = [] if argv == [] else ["--out", str(out)]
    assert cli.main(["measure", *argv, *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("gpucomm measure: error: ") and words in err and "\n" not in err
    assert not out.exists()


def test_an_out_that_cannot_be_written_is_refused_before_measuring(tmp_path, capsys):
    assert cli.main(["measure", "--out", str(tmp_path)]) == 2
    assert "is a directory" in capsys.readouterr().err
    (tmp_path / "f").write_text("")
    assert cli.main(["measure", "--out", str(tmp_path / "f" / "p.json")]) == 2
    assert "is a file; give a path under a directory" in capsys.readouterr().err


def test_estimate_prints_the_grids_wall_time_without_measuring(capsys):
    assert cli.main(["measure", "--estimate"]) == 0
    assert "default grid" in capsys.readouterr().out
    assert cli.main(["measure", "--estimate", "--step-rounds", "1"]) == 0
    assert "whole steps in 1 round;" in capsys.readouterr().out
