"""gpucomm.testing.spawn and check_ranks."""

from __future__ import annotations

import os

import pytest
import torch

import gpucomm.dist as gd
from gpucomm.testing import check_ranks, spawn


def _report() -> tuple[int, int, str, torch.Tensor]:
    t = torch.arange(1000.0) * gd.get_rank()
    gd.all_reduce(t)
    return gd.get_rank(), gd.get_world_size(), os.environ["RANK"], t  # a tensor travels back by value


@pytest.mark.slow
def test_spawn_runs_a_body_on_every_rank_of_a_gloo_world_of_three():
    results = spawn(_report, world_size=3)
    assert [r[:3] for r in results] == [(r, 3, str(r)) for r in range(3)]
    for r in results:
        assert torch.equal(r[3], torch.arange(1000.0) * 3)


def test_spawn_rejects_bad_world_sizes():
    with pytest.raises(ValueError, match="world_size: expected an int >= 1"):
        spawn(_report, world_size=0)


def test_check_ranks_lists_every_rank_problem():
    check_ranks([[], []])
    with pytest.raises(AssertionError, match=r"2 problem\(s\):\nrank 0: a\nrank 2: b"):
        check_ranks([["a"], [], ["b"]])


def test_spawn_refuses_more_ranks_than_the_machine_holds_unless_asked_for():
    too_many = 4 * (os.cpu_count() or 1) + 1
    with pytest.raises(ValueError, match="nprocs: expected at most .* allow_oversubscribe=True"):
        spawn(_report, world_size=too_many)
