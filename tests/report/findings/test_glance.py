"""The glance bound: five screen lines at the terminal's width, one wrapping rule, the most detail that fits."""

from __future__ import annotations

from gpucomm.report.findings import glance


def test_wrap_starts_each_line_and_indents_its_continuations():
    line = "gpucomm.dist vs torch.distributed: faster at 3 of 10 ops (scatter 1.13x from 4 MiB up, …)"
    wrapped = glance.wrap(line, 40)
    assert all(len(x) <= 40 for x in wrapped) and all(x.startswith("  ") for x in wrapped[1:])
    assert " ".join(x.strip() for x in wrapped) == line
    assert glance.wrap("", 80) == [""] and len(glance.wrap("x" * 50, 5)[0]) == glance.MIN_WIDTH


def test_screen_lines_count_what_the_terminal_shows():
    assert glance.screen_lines(["a" * 80, "b" * 81], 80) == 3
    assert glance.screen_lines([], 80) == 0


def test_fit_keeps_the_most_detailed_candidate_that_fits_else_the_last():
    long, short = ["word " * 100], ["answer: short"]
    assert glance.fit([long, short], 80) == short
    assert glance.fit([long, short], 10_000) == long
    assert glance.fit([long, long + ["x"]], 20) == long + ["x"]  # none fits: the last (the caller's shortest)
    assert glance.fit([["a"] * 6, ["a"] * 5], 80) == ["a"] * 5
    assert glance.fit([["a"] * 2, ["a"]], 80, max_lines=1) == ["a"]
