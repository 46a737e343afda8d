"""gpucomm.communicator.checks: the shared argument checks name the argument, the expectation and the fix."""

from __future__ import annotations

import pytest
import torch

from gpucomm.communicator import LocalCommunicator
from gpucomm.communicator.checks import check_avg_dtype, check_held, check_root, check_shape, check_splits


def test_check_held():
    comm = LocalCommunicator(["cpu", "cpu"])
    ts = [torch.ones(1), torch.ones(1)]
    assert check_held(comm, ts, "tensors") == ts
    assert check_held(comm, [None, ts[1]], "outputs", optional=True) == [None, ts[1]]
    with pytest.raises(TypeError, match=r"tensors\[0\]: expected a torch.Tensor"):
        check_held(comm, [None, ts[1]], "tensors")
    with pytest.raises(ValueError, match=r"tensors: expected 2 tensor\(s\)"):
        check_held(comm, ts[:1], "tensors")
    with pytest.raises(TypeError, match="wrap a single tensor"):
        check_held(comm, ts[0], "tensors", optional=True)


def test_check_root_shape_splits_avg():
    comm = LocalCommunicator(["cpu", "cpu"])
    assert check_root(comm, 1) == 1
    with pytest.raises(TypeError, match="root: expected an int"):
        check_root(comm, True)
    with pytest.raises(ValueError, match=r"root: expected a participant index in \[0, 2\), but got 2"):
        check_root(comm, 2)
    with pytest.raises(ValueError, match=r"out: expected shape \[2\] \(why\), but got shape \[3\]"):
        check_shape("out", torch.ones(3), (2,), "why")
    with pytest.raises(ValueError, match="splits into n=2 equal chunks"):
        check_splits("inputs[0]", torch.ones(3), 2)
    with pytest.raises(ValueError, match="op: expected a floating-point tensor"):
        check_avg_dtype("avg", torch.ones(2, dtype=torch.int64))
    check_avg_dtype("sum", torch.ones(2, dtype=torch.int64))
