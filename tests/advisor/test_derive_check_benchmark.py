"""benchmarks/derive_check.py: the shipped H200 profile's own points, relabelled as an H100's, come back at the
derivation's factors (compute-bound kinds x1, memory-bound x 4.8/3.35 against the H200's price); times scaled by
a known factor come back scaled by it in both ratios; bad input is one line and exit 2, nothing written."""

from __future__ import annotations

import copy
import importlib.util
import json
import math
import statistics
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from gpucomm.advisor.compute import profile
from gpucomm.advisor.compute.derive import TARGETS

_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(_ROOT / "benchmarks"))
_spec = importlib.util.spec_from_file_location("derive_check", _ROOT / "benchmarks" / "derive_check.py")
check = importlib.util.module_from_spec(_spec)
sys.modules["derive_check"] = check
_spec.loader.exec_module(check)

SHIPPED = _ROOT / "src/gpucomm/advisor/compute/data/h200.json"
H100 = "NVIDIA H100 80GB HBM3"


@pytest.fixture(scope="module")
def shipped() -> profile.ComputeProfile:
    return profile.load(SHIPPED, arg="old")


@pytest.fixture(scope="module")
def src():
    return check.derived_source()


def _as_h100(prof: profile.ComputeProfile, path: Path, factor: float = 1.0, **device) -> str:
    points = copy.deepcopy(prof.points)
    for rows in points.values():
        for r in rows:
            for k in list(r):
                if k.endswith("_s") or k in ("seconds", "busy_seconds"):
                    r[k] *= factor
    profile.save(replace(prof, points=points, device={**prof.device, "name": H100, **device}), path)
    return str(path)


def _ratios(src, prof, kind):
    got = [check.price(src, kind, r) for r in prof.points[kind][:12]]
    return [(m / d, m / h) for m, d, h, _, _ in got]


def test_the_derivation_factors_come_back(shipped, src):
    """Against the H200's own price the derived one is x0.966 (the measured sustained-clock ratio) for matmuls
    and attention and x4.8/3.35 for the optimizer and the embedding (memory-bound): derived over the H200's price,
    (measured/H200) / (measured/derived), is exactly that factor."""
    memory, compute = 4.8 / 3.35, TARGETS["h100-nvswitch"].clock_ratio
    for kind, want in (("kernels", compute), ("attention", compute), ("optimizer", memory), ("embedding", memory)):
        for md, mh in _ratios(src, shipped, kind):
            assert mh / md == pytest.approx(want, rel=1e-9), kind
    # a layer mixes the two: strictly between
    for md, mh in _ratios(src, shipped, "layer"):
        assert compute < mh / md < memory


def test_a_known_factor_comes_back_in_both_ratios(shipped, src, tmp_path):
    base = check.load_h100(_as_h100(shipped, tmp_path / "a.json"))
    slow = check.load_h100(_as_h100(shipped, tmp_path / "b.json", factor=1.25))
    for kind in ("layer", "kernels", "attention", "head", "embedding", "optimizer"):
        for (a_d, a_h), (b_d, b_h) in zip(_ratios(src, base, kind), _ratios(src, slow, kind), strict=True):
            assert b_d / a_d == pytest.approx(1.25) and b_h / a_h == pytest.approx(1.25), kind


def test_own_grid_points_price_near_themselves(shipped, src):
    """The H200 profile prices its own matmul points (interpolation through them): measured/H200 median ~1."""
    med = statistics.median(mh for _, mh in _ratios(src, shipped, "kernels"))
    assert math.isclose(med, 1.0, rel_tol=0.05)


def test_report_has_every_kind_and_the_split(shipped, tmp_path, capsys):
    out = tmp_path / "r.txt"
    assert check.main([_as_h100(shipped, tmp_path / "h.json"), "--out", str(out)]) == 0
    text = out.read_text()
    assert text == capsys.readouterr().out
    for row in ("| layer |", "| kernels |", "| attention |", "| head |", "| embedding |", "| optimizer |",
                "| layer · ac=op |", "| layer · busy |", "| layer · tp=1 |", "| layer · h |"):
        assert row in text, row
    assert "memory-bound x 1.4328" in text


@pytest.mark.parametrize("case", ["h200", "missing", "corrupt", "holdout"])
def test_bad_input_is_one_line_and_exit_2(case, shipped, tmp_path, capsys):
    out = tmp_path / "r.txt"
    good = _as_h100(shipped, tmp_path / "h.json")
    argv = {"h200": [str(SHIPPED)], "missing": [str(tmp_path / "nope.json")],
            "corrupt": [str(tmp_path / "c.json")], "holdout": [good, "--holdout", str(tmp_path / "nope.jsonl")]}[case]
    (tmp_path / "c.json").write_text("{not json")
    assert check.main([*argv, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("derive_check: ") and err.count("\n") == 1
    assert not out.exists()


def test_a_held_out_row_is_predicted_both_ways(shipped, src, tmp_path):
    """An H100 row at a shape the profile measured is predicted from the derived profile and from the given one,
    and its layer is priced by both: the H200's own points relabelled price it at the derivation's inverse factor
    (between 1/1.4328 and 1/0.966) with the same in-step factor (the same whole steps); a row of the 96 GB part is
    named as not predicted."""
    row = json.loads((_ROOT / "benchmarks/published_holdout.jsonl").read_text().splitlines()[11])
    assert row["id"] == "llmf-h100-mpt7b-s8192-8g"
    rows = [{**row, "hidden": 3072, "heads": 24, "seq_len": 4096, "id": "h80"},
            {**row, "hidden": 3072, "heads": 24, "seq_len": 4096, "gpu_mem_gb": 96, "id": "h96"}]
    hold = tmp_path / "hold.jsonl"
    hold.write_text("".join(json.dumps(r) + "\n" for r in rows))
    good = _as_h100(shipped, tmp_path / "h.json")
    lines = check.holdout_report(str(hold), [("h", good, check.load_h100(good))], src)
    table = [line for line in lines if line.startswith("| h80 |")]
    assert len(table) == 2, lines
    pred = [c.strip() for c in table[0].strip("|").split("|")]
    assert pred[3].endswith("%") and pred[7].endswith("%")
    layer = [c.strip() for c in table[1].strip("|").split("|")]
    assert layer[3] == layer[5] and float(layer[3]) != 1.0
    assert 1 / 1.4328 < float(layer[6]) < 1 / TARGETS["h100-nvswitch"].clock_ratio
    assert any("h96 (h100-96gb-nvswitch)" in line for line in lines)
