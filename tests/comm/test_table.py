"""One table of cases (comm_cases.CASES), run on CPU devices everywhere and against torch.cuda.comm on GPUs.

On CPU the expected values come from plain torch ops in the table (cat, chunk, sum), never from
gpucomm.  With CUDA, each case also runs through torch.cuda.comm on the same CUDA devices (one GPU:
cuda:0 repeated) and both results must match the table and each other, types included (list vs
tuple).
"""

from __future__ import annotations

import pytest
import torch
from comm_cases import CASES, assert_same

import gpucomm.comm as gcomm
from gpucomm.devices import cuda_device_count
from gpucomm.testing.markers import requires_gpus


def _cuda_devices(n: int) -> list[torch.device]:
    count = cuda_device_count()
    return [torch.device("cuda", i % count) for i in range(n)]


@pytest.mark.parametrize("case", CASES, ids=str)
def test_case_on_cpu_devices(case):
    devices = [torch.device("cpu")] * case.n
    assert_same(case.call(gcomm, devices), case.expect(devices), case.name)


@requires_gpus(1)
@pytest.mark.parametrize("case", CASES, ids=str)
def test_case_on_cuda_devices_matches_torch(case):
    devices = _cuda_devices(case.n)
    ours = case.call(gcomm, devices)
    torch.cuda.synchronize()
    assert_same(ours, case.expect(devices), f"gpucomm.{case.name}")
    if case.torch_too:
        import torch.cuda.comm as tcomm

        theirs = case.call(tcomm, devices)
        torch.cuda.synchronize()
        assert_same(ours, theirs, f"gpucomm vs torch.cuda.comm: {case.name}")


def test_every_public_function_has_a_case():
    covered = {c.name.split("_")[0] for c in CASES} | {c.name.rsplit("_", 1)[0] for c in CASES}
    names = {c.name for c in CASES}
    for fn in set(gcomm.__all__) - {"prepare", "Prepared"}:  # prepared calls: tests/comm/test_prepare.py
        assert fn in covered or any(n.startswith(fn) for n in names), f"{fn} has no case in the table"
