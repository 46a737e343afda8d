"""benchmarks/clock_ratio.py: base over target sustained clock, median over the shapes the power limit set on
every run of both GPUs; a shape at its boost clock is shown and left out; bad input is one line and exit 2,
nothing written; the committed reports give the factor derive.py cites."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(_ROOT / "benchmarks"))  # its sibling modules (_report)
_spec = importlib.util.spec_from_file_location("clock_ratio", _ROOT / "benchmarks" / "clock_ratio.py")
clock = importlib.util.module_from_spec(_spec)
sys.modules["clock_ratio"] = clock
_spec.loader.exec_module(clock)


def _report(path: Path, gpu: str, shapes: dict[str, tuple[int, int]]) -> str:
    lines = ["# burst vs sustained", "", "command: x", f"date: 2026-12-06; device: {gpu}; torch 2.11", ""]
    for name, (burst, settled) in shapes.items():
        lines += [f"## {name}: gpt hidden 1, ffn 4, 1/1 heads, 1 x 1 tokens, ac none",
                  f"burst (gpucomm measure's window, 2+5 iterations after 1 s idle): 3.0 ms; SM {burst} MHz, 130 W "
                  "right after",
                  f"settled (second half of the run): 3.2 ms, SM {settled} MHz, 690 W (medians of NVML reads)", ""]
    path.write_text("\n".join(lines))
    return str(path)


def test_the_factor_is_the_median_of_power_limited_shapes_runs_averaged(tmp_path):
    b1 = _report(tmp_path / "b1.txt", "H200", {"a": (1980, 1700), "b": (1980, 1600), "c": (1980, 1980)})
    b2 = _report(tmp_path / "b2.txt", "H200", {"a": (1980, 1720), "b": (1980, 1620), "c": (1980, 1980)})
    t = _report(tmp_path / "t.txt", "H100", {"a": (1980, 1800), "b": (1980, 1650), "c": (1980, 1900)})
    lines, factor = clock.ratio([b1, b2], [t])
    # c: the H200 runs stayed at the boost clock, so the limit did not set it there: shown, not counted
    assert factor == pytest.approx(((1710 / 1800) + (1610 / 1650)) / 2)
    assert any("| c |" in x and "no (boost clock)" in x for x in lines)


def test_no_power_limited_shape_and_unreadable_reports_exit_2_and_write_nothing(tmp_path, capsys):
    b = _report(tmp_path / "b.txt", "H200", {"a": (1980, 1980)})
    t = _report(tmp_path / "t.txt", "H100", {"a": (1980, 1800)})
    out = tmp_path / "out.txt"
    assert clock.main(["--base", b, "--target", t, "--out", str(out)]) == 2
    assert "no shape settled below its burst clock" in capsys.readouterr().err and not out.exists()
    (tmp_path / "junk.txt").write_text("not a report\n")
    assert clock.main(["--base", str(tmp_path / "junk.txt"), "--target", t, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--base" in err and "junk.txt" in err and "sustained_clock.py report" in err
    assert not out.exists()
    assert clock.main(["--base", b, "--target", str(tmp_path / "missing.txt"), "--out", str(out)]) == 2
    assert "--target" in capsys.readouterr().err and not out.exists()


def test_the_committed_reports_give_the_factor_the_derivation_cites():
    from gpucomm.advisor.compute.derive import TARGETS

    r = _ROOT / "benchmarks/results"
    _, factor = clock.ratio([str(r / "sustained-clock_h200x1_2026-12-04.txt"),
                             str(r / "sustained-clock-r2_h200x1_2026-12-04.txt")],
                            [str(r / "sustained-clock_h100x1_2026-12-06/sustained-clock_h100x1_2026-12-06.txt")])
    assert round(factor, 3) == TARGETS["h100-nvswitch"].clock_ratio
