"""Device parsing: every spelling users write, and the errors for the ones that are wrong."""

from __future__ import annotations

import pytest
import torch

from gpucomm import devices as D


@pytest.mark.parametrize(("spec", "expected"), [
    (0, torch.device("cuda", 0)), ("1", torch.device("cuda", 1)), ("cuda:2", torch.device("cuda", 2)),
    ("cpu", torch.device("cpu")), (torch.device("cuda", 3), torch.device("cuda", 3)),
])
def test_parse_device_spellings(spec, expected):
    assert D.parse_device(spec) == expected


@pytest.mark.parametrize("bad", [-1, "-2"])
def test_negative_index_is_rejected(bad):
    with pytest.raises(ValueError, match="non-negative device index, but got -"):
        D.parse_device(bad)


@pytest.mark.parametrize("bad", [1.0, None, True, [0]])
def test_wrong_type_is_a_type_error(bad):
    with pytest.raises(TypeError, match="expected an int, str or torch.device"):
        D.parse_device(bad)


def test_garbage_string():
    with pytest.raises(ValueError, match="'gpu0' is not a device"):
        D.parse_device("gpu0")


def test_cpu_can_be_refused():
    with pytest.raises(ValueError, match="expected a CUDA device"):
        D.parse_device("cpu", allow_cpu=False)


def test_parse_devices_names_position():
    assert D.parse_devices(["cpu", 0]) == [torch.device("cpu"), torch.device("cuda", 0)]
    with pytest.raises(ValueError, match=r"devices\[1\]"):
        D.parse_devices(["cpu", -1])
    with pytest.raises(TypeError, match="wrap it in a list"):
        D.parse_devices("cuda:0")


def test_default_devices_match_what_is_visible():
    count = D.cuda_device_count()
    assert count == (torch.cuda.device_count() if torch.cuda.is_available() else 0)
    devs = D.default_devices(3)
    assert len(devs) == 3
    if count == 0:
        assert devs == [torch.device("cpu")] * 3
        assert D.default_devices() == [torch.device("cpu")] * 4
    else:
        assert devs == [torch.device("cuda", i % count) for i in range(3)]
