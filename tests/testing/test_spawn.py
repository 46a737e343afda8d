"""gpucomm.testing.spawn and check_ranks."""

from __future__ import annotations

import os

import pytest
import torch

import gpucomm.dist as gd
from gpucomm.testing import check_ranks, spawn


def _report() -> tuple[int, int, str, float]:
    t = torch.tensor([float(gd.get_rank())])
    gd.all_reduce(t)
    return gd.get_rank(), gd.get_world_size(), os.environ["RANK"], float(t)


def test_spawn_runs_a_body_on_every_rank_of_a_gloo_world_of_three():
    assert spawn(_report, world_size=3) == [(r, 3, str(r), 3.0) for r in range(3)]


def test_spawn_rejects_bad_world_sizes():
    with pytest.raises(ValueError, match="world_size: expected an int >= 1"):
        spawn(_report, world_size=0)


def test_check_ranks_lists_every_rank_problem():
    check_ranks([[], []])
    with pytest.raises(AssertionError, match=r"2 problem\(s\):\nrank 0: a\nrank 2: b"):
        check_ranks([["a"], [], ["b"]])
