"""Communicator (base): the interface, prepare's own checks, and no import of the implementations."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest
import torch

from gpucomm.communicator import COLLECTIVES, Communicator, LocalCommunicator, ProcessGroupCommunicator, base


def test_base_imports_no_implementation():
    tree = ast.parse(Path(base.__file__).read_text())
    imported = {n.module for n in tree.body if isinstance(n, ast.ImportFrom)}
    assert not imported & {"gpucomm.communicator.local", "gpucomm.communicator.process_group"}


def test_prepare_accepts_exactly_the_collective_methods():
    for name in COLLECTIVES:
        assert callable(getattr(Communicator, name)), name
    abstract = {n for n in Communicator.__abstractmethods__ if n in COLLECTIVES}
    assert abstract == set(COLLECTIVES)
    for impl in (LocalCommunicator, ProcessGroupCommunicator):
        for name in COLLECTIVES:  # every method has a plan that prepare binds, with the same parameters
            method = inspect.signature(getattr(impl, name)).parameters
            plan = inspect.signature(getattr(impl, "_plan_" + name)).parameters
            assert list(method) == list(plan), (impl.__name__, name)


def test_prepare_refuses_unknown_ops_and_non_bool_graph():
    comm = LocalCommunicator(["cpu"])
    with pytest.raises(ValueError, match=r"op: expected one of \['broadcast'"):
        comm.prepare("barrier", [torch.ones(1)])
    with pytest.raises(TypeError, match="graph: expected a bool"):
        comm.prepare("all_reduce", [torch.ones(1)], graph=1)


def test_prepare_passes_the_reductions_op_by_keyword():
    comm = LocalCommunicator(["cpu", "cpu"])
    ts = [torch.tensor([1.0, 5.0]), torch.tensor([3.0, 2.0])]
    comm.prepare("all_reduce", ts, op="max")()
    assert torch.equal(ts[0], torch.tensor([3.0, 5.0]))
