"""Interpolation over a ragged grid, by hand."""

import math

import pytest

from gpucomm.advisor.compute.interpolate import Axis, GridError, nested


def test_between_points_linear_in_the_logarithm_of_the_coordinate():
    pts = [((100,), 1.0), ((400,), 3.0)]
    v, notes = nested(pts, [Axis("tokens")], (200,), "x")
    assert v == pytest.approx(2.0) and notes == ()  # log 200 is halfway between log 100 and log 400
    assert nested(pts, [Axis("tokens")], (400,), "x") == (3.0, ())


def test_a_ragged_grid_interpolates_each_branch_then_across_branches():
    # tp=1 measured at tokens 100 and 400, tp=4 at 100 only: a query at tp=2 (halfway in log) and tokens 100
    pts = [((1, 100), 1.0), ((1, 400), 3.0), ((4, 100), 5.0)]
    v, notes = nested(pts, [Axis("tp"), Axis("tokens")], (2, 100), "x")
    assert v == pytest.approx(3.0) and notes == ()
    # tokens 200 at tp=4 lies outside that branch's single measured value: said, and held
    v, notes = nested(pts, [Axis("tp"), Axis("tokens")], (4, 200), "x")
    assert v == 5.0 and notes == ("x: tokens 200 outside the measured 100",)


def test_outside_the_range_hold_or_extend_and_say_so():
    pts = [((100,), 1.0), ((400,), 3.0)]
    above, n = nested(pts, [Axis("t", above="hold")], (1600,), "x")
    assert above == 3.0 and n == ("x: t 1600 outside the measured 100-400",)
    below, n = nested(pts, [Axis("t", below="extend")], (25,), "x")
    assert below == pytest.approx(1.0 - 2.0) and n  # the first segment continued one step down
    assert math.isclose(nested(pts, [Axis("t", below="hold")], (25,), "x")[0], 1.0)


def test_only_the_branches_read_can_make_a_lookup_extrapolated():
    # hidden 1,000 lies between 768 and 1,536, both measured at 4,096 tokens; the 6,144 branch lacks them
    pts = [((768, 4096), 1.0), ((1536, 4096), 2.0), ((6144, 1024), 9.0)]
    _, notes = nested(pts, [Axis("hidden"), Axis("tokens")], (1000, 4096), "x")
    assert notes == ()


def test_no_points_is_an_error_naming_what_was_asked():
    with pytest.raises(GridError, match="head: the profile holds no measured point"):
        nested([], [Axis("t")], (1,), "head")
