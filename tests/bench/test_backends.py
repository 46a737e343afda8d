"""The backend table: attributes in one place, importable without torch, capabilities from the rows."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from gpucomm.bench import backends
from gpucomm.bench.backends import BACKENDS, GROUP, PROCESS
from gpucomm.bench.buffers import IN_PLACE, OUT_OF_PLACE
from gpucomm.collectives import CollectiveName as C
from gpucomm.collectives import ReduceOp


def test_table_is_in_display_order_with_every_attribute():
    assert list(BACKENDS) == ["torch.cuda.comm", "gpucomm.comm", "torch.distributed", "gpucomm.dist"]
    assert [b.order for b in BACKENDS.values()] == sorted(b.order for b in BACKENDS.values())
    assert {n: b.baseline for n, b in BACKENDS.items()} == {
        "torch.cuda.comm": None, "gpucomm.comm": "torch.cuda.comm",
        "torch.distributed": None, "gpucomm.dist": "torch.distributed"}
    assert {n: b.scope for n, b in BACKENDS.items()} == {
        "torch.cuda.comm": PROCESS, "gpucomm.comm": PROCESS, "torch.distributed": GROUP, "gpucomm.dist": GROUP}
    assert all(b.note and b.name == n for n, b in BACKENDS.items())
    assert backends.baseline_of("gpucomm.dist") == "torch.distributed"
    assert backends.baseline_of("torch.cuda.comm") == "torch.cuda.comm"  # a baseline's ratio is to itself
    assert backends.baseline_of("nccl") is None


def test_importing_the_table_imports_no_torch():
    code = "import sys, gpucomm.bench.backends, gpucomm.collectives; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_every_backend_has_its_adapter_class():
    from gpucomm.bench.adapters import ADAPTERS

    assert set(ADAPTERS) == set(BACKENDS)
    for name, cls in ADAPTERS.items():
        assert cls.spec is BACKENDS[name]


def test_torch_cuda_comm_offers_only_what_torch_has():
    tcc = BACKENDS["torch.cuda.comm"]
    assert "CUDA" in tcc.unsupported(C.BROADCAST, torch.float32, None, "cpu")
    assert tcc.unsupported(C.ALL_REDUCE, torch.float32, ReduceOp.SUM, "cuda") == "torch.cuda.comm has no all_reduce"
    assert tcc.unsupported(C.REDUCE, torch.float32, ReduceOp.MAX, "cuda") == "torch.cuda.comm.reduce_add only sums"
    assert all(tcc.unsupported(op, torch.float32, ReduceOp.SUM, "cuda") is None
               for op in (C.BROADCAST, C.REDUCE, C.SCATTER, C.GATHER))
    assert tcc.placements_for(C.BROADCAST) == (OUT_OF_PLACE,)


def test_placements_follow_the_rows():
    ours = BACKENDS["gpucomm.comm"]
    assert ours.placements_for(C.ALL_REDUCE) == (IN_PLACE,)
    assert set(ours.placements_for(C.ALL_GATHER)) == {IN_PLACE, OUT_OF_PLACE}
    assert backends.placements_for(C.ALL_TO_ALL) == (OUT_OF_PLACE,)


@pytest.mark.parametrize("name", ["gpucomm.comm", "torch.distributed", "gpucomm.dist"])
def test_avg_needs_a_floating_dtype(name):
    b = BACKENDS[name]
    assert b.unsupported(C.ALL_REDUCE, torch.int32, ReduceOp.AVG, "cpu") is not None
    assert b.unsupported(C.ALL_REDUCE, torch.bfloat16, ReduceOp.AVG, "cpu") is None


def test_wrappers_are_timed_plain_and_prepared_the_raw_libraries_plain():
    assert BACKENDS["gpucomm.comm"].forms == ("plain", "prepared", "graph")
    assert BACKENDS["gpucomm.dist"].forms == ("plain", "prepared")  # gpucomm.dist.prepare has no graph=
    assert BACKENDS["torch.distributed"].forms == ("plain",)
