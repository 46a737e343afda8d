"""gpucomm.comm._checks: the cached device-list parsing."""

from __future__ import annotations

import pytest
import torch

from gpucomm.comm import _checks


def test_device_lists_are_cached_but_index_less_cuda_is_not():
    first = _checks.devices_arg(["cpu", torch.device("cpu")])
    assert _checks.devices_arg(["cpu", torch.device("cpu")]) == first
    assert not _checks._indexed("cuda") and not _checks._indexed(torch.device("cuda"))
    assert _checks._indexed(0) and _checks._indexed("cuda:1") and _checks._indexed("cpu")
    with pytest.raises(TypeError, match=r"devices\[0\]"):
        _checks.devices_arg([True])  # bool is not a device index, cached or not
