"""benchmarks/profile_compare.py: the shipped profile against copies with known factors gives exactly those
ratios, the pace split classifies as its docstring says, and bad input is one line and exit 2, nothing written."""

from __future__ import annotations

import copy
import importlib.util
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from gpucomm.advisor.compute import profile

_ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("profile_compare", _ROOT / "benchmarks" / "profile_compare.py")
compare = importlib.util.module_from_spec(_spec)
sys.modules["profile_compare"] = compare
_spec.loader.exec_module(compare)

SHIPPED = _ROOT / "src/gpucomm/advisor/compute/data/h200.json"


@pytest.fixture(scope="module")
def shipped() -> profile.ComputeProfile:
    return profile.load(SHIPPED, arg="old")


def _save(prof: profile.ComputeProfile, path: Path, points: dict | None = None, **device) -> str:
    profile.save(replace(prof, points=points or prof.points, device={**prof.device, **device}), path)
    return str(path)


def _rows(out: str) -> dict[tuple[str, str], list[str]]:
    """Each table row's cells after its first two, by those two (kind, field or class)."""
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in out.splitlines() if line.startswith("| ")]
    return {(c[0], c[1]): c[2:] for c in cells}


def _paced(point: dict, kind: str) -> bool:
    """Host-paced as the script's docstring defines it, written out again here."""
    if kind == "layer":
        return (point["busy_fwd_s"] + point["busy_bwd_s"]) / (point["fwd_s"] + point["bwd_s"]) < 0.8
    return point["busy_seconds"] / point["seconds"] < 0.8


def test_known_factors_come_back_as_the_ratios(shipped, tmp_path, capsys):
    """Every layer's fwd_s x1.10, one step's seconds x0.5, every head's seconds x0.95; one attention point dropped
    and one optimizer point of a new shape added."""
    points = copy.deepcopy(shipped.points)
    for p in points["layer"]:
        p["fwd_s"] *= 1.10
    points["step"][3]["seconds"] *= 0.5
    for p in points["head"]:
        p["seconds"] *= 0.95
    points["attention"].pop(0)
    points["optimizer"].append({**points["optimizer"][0], "params": 7})
    new, out = _save(shipped, tmp_path / "new.json", points), tmp_path / "r.txt"
    assert compare.main([str(SHIPPED), new, "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert out.read_text() == text
    rows = _rows(text)
    n = {k: len(v) for k, v in shipped.points.items()}
    assert rows[("layer", "fwd_s")] == [str(n["layer"])] + ["x1.100"] * 5
    assert rows[("layer", "bwd_s")] == [str(n["layer"])] + ["x1.000"] * 5
    assert rows[("head", "seconds")] == [str(n["head"])] + ["x0.950"] * 5
    assert rows[("step", "seconds")] == [str(n["step"]), "x1.000", "x1.000", "x1.000", "x0.500", "x1.000"]
    assert rows[("step", "busy_seconds")] == [str(n["step"])] + ["x1.000"] * 5
    assert rows[("attention", "fwd_s")][0] == str(n["attention"] - 1)
    assert rows[("optimizer", "seconds")] == [str(n["optimizer"])] + ["x1.000"] * 5
    assert rows[("attention", str(n["attention"] - 1))] == ["1", "0"]
    assert rows[("optimizer", str(n["optimizer"]))] == ["0", "1"]
    assert text.splitlines()[2] == f"command: python benchmarks/profile_compare.py {SHIPPED} {new} --out {out}"


def test_layer_and_step_times_split_by_the_old_points_pace(shipped, tmp_path, capsys):
    """Host-paced points x1.20, device-bound x0.90: each class shows only its own factor."""
    points = copy.deepcopy(shipped.points)
    want: dict[tuple[str, str], int] = {}
    for kind, fields in (("layer", ("fwd_s", "bwd_s")), ("step", ("seconds",))):
        for old, p in zip(shipped.points[kind], points[kind], strict=True):
            cls = "host-paced" if _paced(old, kind) else "device-bound"
            want[kind, cls] = want.get((kind, cls), 0) + 1
            for f in fields:
                p[f] *= 1.20 if cls == "host-paced" else 0.90
    assert compare.main([str(SHIPPED), _save(shipped, tmp_path / "new.json", points)]) == 0
    rows = _rows(capsys.readouterr().out)
    assert all(want.get((k, c)) for k in ("layer", "step") for c in ("host-paced", "device-bound"))
    for (kind, cls), count in want.items():
        assert rows[kind, cls] == [str(count)] + ["x1.200" if cls == "host-paced" else "x0.900"] * 3


def test_the_profile_against_itself_is_every_ratio_x1(capsys):
    assert compare.main([str(SHIPPED), str(SHIPPED)]) == 0
    rows = _rows(capsys.readouterr().out)
    ratios = [c for cells in rows.values() for c in cells if c.startswith("x")]
    assert len(ratios) > 100 and set(ratios) == {"x1.000"}


def _refused(argv: list[str], out: Path, capsys) -> str:
    assert compare.main([*argv, "--out", str(out)]) == 2
    got = capsys.readouterr()
    assert not out.exists() and got.out == ""
    err = got.err.strip()
    assert "\n" not in err and err.startswith("profile_compare: error: ") and ", but got " in err
    return err


def test_a_corrupt_or_missing_file_is_one_line_and_exit_2(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text('{"kind": "gpucomm-compute-profile", ')
    err = _refused([str(SHIPPED), str(bad)], tmp_path / "r.txt", capsys)
    assert err.startswith(f"profile_compare: error: new: expected a compute profile, but got {bad}: not JSON")
    err = _refused([str(tmp_path / "none.json"), str(SHIPPED)], tmp_path / "r.txt", capsys)
    assert err.startswith("profile_compare: error: old: expected a compute profile, but got ")
    assert "cannot be read" in err


def test_two_gpus_are_one_line_and_exit_2(shipped, tmp_path, capsys):
    other = _save(shipped, tmp_path / "h100.json", name="NVIDIA H100")
    err = _refused([str(SHIPPED), other], tmp_path / "r.txt", capsys)
    assert err.startswith("profile_compare: error: new: expected a profile of the NVIDIA H200")
    assert "but got NVIDIA H100" in err


def test_disjoint_profiles_are_one_line_and_exit_2(shipped, tmp_path, capsys):
    points = {k: [] for k in profile.POINT_KINDS}
    points["optimizer"] = [{**p, "params": p["params"] + 1} for p in shipped.points["optimizer"]]
    err = _refused([str(SHIPPED), _save(shipped, tmp_path / "new.json", points)], tmp_path / "r.txt", capsys)
    assert "but got none in common" in err


def test_a_shape_is_every_field_that_is_not_measured():
    step = {"layer": {"hidden": 8, "ac": "none"}, "layers": 2, "seconds": 1.0, "busy_seconds": 0.5,
            "peak_reserved_bytes": 3}
    assert compare.key_of(step) == compare.key_of({**step, "seconds": 2.0, "peak_reserved_bytes": 9})
    assert compare.key_of(step) != compare.key_of({**step, "layer": {"hidden": 16, "ac": "none"}})
    assert compare.spread([1.5]) == (1.5,) * 5
