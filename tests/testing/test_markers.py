"""requires_gpus(n): skipped below n visible devices, tagged so GPU runs can select them."""

from __future__ import annotations

import pytest

from gpucomm.devices import cuda_device_count
from gpucomm.testing import requires_gpus


def test_marker_skips_exactly_below_n():
    found = cuda_device_count()
    for n in (1, 2, 8, found + 1):
        def body():
            pass

        decorated = requires_gpus(n)(body)
        marks = {m.name: m for m in decorated.pytestmark}
        assert marks["requires_gpus"].args == (n,)
        assert marks["skipif"].args[0] is (found < n)
        assert f"needs {n} CUDA device(s), found {found}" == marks["skipif"].kwargs["reason"]


@pytest.mark.parametrize("bad", [0, -1, 1.5])
def test_marker_rejects_bad_counts(bad):
    with pytest.raises(ValueError, match="n >= 1"):
        requires_gpus(bad)
