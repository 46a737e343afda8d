"""Communicator (base): the interface, prepare's own checks, and no import of the implementations."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest
import torch

from gpucomm import collectives
from gpucomm.communicator import Communicator, LocalCommunicator, ProcessGroupCommunicator, base, methods


def test_base_imports_no_implementation():
    tree = ast.parse(Path(base.__file__).read_text())
    imported = {n.module for n in tree.body if isinstance(n, ast.ImportFrom)}
    assert not imported & {"gpucomm.communicator.local", "gpucomm.communicator.process_group"}


def test_the_methods_are_the_rows_that_declare_one():
    rows = {str(name): row for name, row in collectives.COLLECTIVES.items()}
    assert methods() == [name for name, row in rows.items() if row.method is not None]
    for name in methods():
        method = getattr(Communicator, name)
        m = rows[name].method
        params = list(inspect.signature(method).parameters)
        assert params == ["self", *m.params], name
        assert method.__doc__ == m.doc
        for impl in (LocalCommunicator, ProcessGroupCommunicator):  # built for each class, from the same row
            built = getattr(impl, name)
            assert inspect.signature(built) == inspect.signature(method) and built.__doc__ == m.doc, (impl, name)
            assert built.__qualname__ == f"Communicator.{name}"
    assert not {n for n in Communicator.__abstractmethods__ if n in methods()}


def test_every_row_with_a_method_has_gpucomm_comms_local_form():
    from gpucomm.comm import _kernels

    assert sorted(_kernels.local_forms()) == sorted(methods())


def test_methods_bind_arguments_as_python_does():
    comm = LocalCommunicator(["cpu", "cpu"])
    ts = [torch.ones(2), torch.ones(2)]
    assert comm.all_reduce(tensors=ts, op="max") == ts
    with pytest.raises(TypeError, match="unexpected keyword argument 'dst'"):
        comm.reduce(ts, dst=0)
    with pytest.raises(TypeError, match="multiple values for argument 'tensors'"):
        comm.all_reduce(ts, tensors=ts)
    with pytest.raises(TypeError, match="missing 1 required positional argument: 'inputs'"):
        comm.all_gather(ts)
    with pytest.raises(TypeError, match="takes 3 positional arguments but 4"):  # Python's count, self included
        comm.all_gather(ts, ts, 0)


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
