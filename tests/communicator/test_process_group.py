"""ProcessGroupCommunicator: THE body (tests/communicator/_body.py) on gloo and NCCL, plain and prepared."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch
import torch.distributed as td

import gpucomm.dist as gd
from gpucomm.communicator import ProcessGroupCommunicator
from gpucomm.testing import check_ranks, requires_gpus, spawn

# THE shared body, loaded by path (importlib import mode; spawned ranks load this file the same way).
_SPEC = importlib.util.spec_from_file_location("communicator_body", Path(__file__).with_name("_body.py"))
_BODY = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(_BODY)
check_collectives = _BODY.check_collectives


def _on_process_group(prepared: bool = False) -> list[str]:
    comm = ProcessGroupCommunicator()
    problems = check_collectives(comm, prepared)
    if (comm.rank, comm.world_size, comm.n) != (gd.get_rank(), gd.get_world_size(), gd.get_world_size()):
        problems.append(f"rank/world_size/n disagree with torch.distributed: {comm!r}")
    if gd.get_world_size() == 4:  # subgroups: participant (group rank) 1 of [1, 3] is global rank 3
        groups = [td.new_group([0, 2]), td.new_group([1, 3])]
        sub = ProcessGroupCommunicator(groups[gd.get_rank() % 2])
        if (sub.n, sub.rank) != (2, gd.get_rank() // 2):
            problems.append(f"subgroup communicator: n={sub.n} rank={sub.rank}")
        problems += [f"subgroup {gd.get_rank() % 2}: {p}" for p in check_collectives(sub, prepared)]
    return problems


# ----- ProcessGroupCommunicator -----------------------------------------------------------------------
@pytest.mark.parametrize("prepared", [False, True], ids=["plain", "prepared"])
def test_process_group_communicator_world_of_one_in_process(prepared):
    with gd.init("gloo"):
        check_ranks([_on_process_group(prepared)])


@pytest.mark.slow
@pytest.mark.parametrize("world_size", [2, 4])
def test_process_group_communicator_gloo(world_size):
    check_ranks(spawn(_on_process_group, world_size=world_size))


@pytest.mark.slow
def test_process_group_communicator_prepared_gloo():
    check_ranks(spawn(_on_process_group, True, world_size=2))


@requires_gpus(1)
def test_process_group_communicator_nccl_world_of_one_in_process():
    with gd.init("nccl") as pg:
        assert pg.device == torch.device("cuda", 0)
        check_ranks([_on_process_group()])


@requires_gpus(1)
def test_process_group_communicator_nccl_launched_world_of_one():
    check_ranks(gd.launch(_on_process_group, 1, backend="nccl", timeout=300))


@requires_gpus(2)
def test_process_group_communicator_nccl_world_of_two():
    check_ranks(gd.launch(_on_process_group, 2, backend="nccl", timeout=300))


def test_process_group_communicator_needs_a_group():
    with pytest.raises(RuntimeError, match=r"gpucomm.dist.init\(\)"):
        ProcessGroupCommunicator()




def test_prepare_checks_once_and_reruns():
    with gd.init("gloo"):
        comm = ProcessGroupCommunicator()
        t = torch.ones(3)
        with pytest.raises(ValueError, match="root: expected a participant index"):
            comm.prepare("broadcast", [t], 1)
        p = comm.prepare("all_reduce", [t], op="sum")
        t.fill_(5.0)
        p()
        assert torch.equal(t, torch.full((3,), 5.0))
