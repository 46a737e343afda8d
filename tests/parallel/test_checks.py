"""gpucomm.parallel.checks: the communicator rules, names of parameters, output devices, numbers."""

import pytest
import torch
from torch import nn

from gpucomm.communicator import LocalCommunicator
from gpucomm.parallel.checks import check_communicator, check_output_device, check_positive, names

CPU = torch.device("cpu")


def test_communicator_must_hold_the_devices():
    check_communicator(None, [CPU])
    check_communicator(LocalCommunicator(["cpu", "cpu"]), [CPU, CPU])
    with pytest.raises(ValueError, match=r"communicator: expected a one-process communicator over devices "
                                         r"\['cpu', 'cpu'\], but got one over \['cpu', 'cpu', 'cpu'\]"):
        check_communicator(LocalCommunicator(["cpu"] * 3), [CPU, CPU])


def test_names_of_tied_parameters_and_other_checks():
    m = nn.Sequential(nn.Embedding(4, 2), nn.Linear(2, 4, bias=False))
    m[1].weight = m[0].weight
    assert names(m, list(m.parameters())) == ["0.weight"]
    assert check_output_device(None, [CPU]) is None and check_output_device("cpu", [CPU]) == CPU
    with pytest.raises(ValueError, match="output_device: expected a cpu device like the replicas'"):
        check_output_device("cuda:0", [CPU])
    with pytest.raises(TypeError, match="max_norm: expected a positive number or None, but got bool"):
        check_positive(True, "max_norm", optional=True)
    with pytest.raises(ValueError, match="expected a positive finite number, but got inf"):
        check_positive(float("inf"), "max_norm")
