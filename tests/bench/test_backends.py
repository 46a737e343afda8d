"""Adapter capabilities and the mapping of our reduction ops onto torch.distributed's."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist

from gpucomm.bench import backends
from gpucomm.bench.buffers import IN_PLACE, OUT_OF_PLACE
from gpucomm.collectives import CollectiveName as C
from gpucomm.collectives import ReduceOp


@pytest.mark.parametrize("op", list(ReduceOp))
def test_every_reduce_op_has_a_torch_distributed_twin(op):
    assert backends._dist_op(op) == getattr(dist.ReduceOp, {"prod": "PRODUCT"}.get(op.value, op.name))


def test_torch_cuda_comm_offers_only_what_torch_has():
    tcc = backends.TorchCudaComm
    assert "CUDA" in tcc.unsupported(C.BROADCAST, torch.float32, None, "cpu")
    assert tcc.unsupported(C.ALL_REDUCE, torch.float32, ReduceOp.SUM, "cuda") == "torch.cuda.comm has no all_reduce"
    assert tcc.unsupported(C.REDUCE, torch.float32, ReduceOp.MAX, "cuda") is not None
    assert all(tcc.unsupported(op, torch.float32, ReduceOp.SUM, "cuda") is None
               for op in (C.BROADCAST, C.REDUCE, C.SCATTER, C.GATHER))
    assert tcc.placements(C.BROADCAST) == (OUT_OF_PLACE,)


def test_placements_follow_the_communicator_contract():
    assert backends.placements_for(C.ALL_REDUCE) == (IN_PLACE,)
    assert set(backends.placements_for(C.ALL_GATHER)) == {IN_PLACE, OUT_OF_PLACE}
    assert backends.placements_for(C.ALL_TO_ALL) == (OUT_OF_PLACE,)


def test_avg_needs_a_floating_dtype():
    for cls in (backends.GpucommComm, backends.TorchDistributed, backends.GpucommDist):
        assert cls.unsupported(C.ALL_REDUCE, torch.int32, ReduceOp.AVG, "cpu") is not None
        assert cls.unsupported(C.ALL_REDUCE, torch.bfloat16, ReduceOp.AVG, "cpu") is None


def test_factories_name_every_backend():
    assert set(backends.LOCAL_FACTORIES) | set(backends.PROCESS_GROUP_FACTORIES) == set(backends.BACKENDS)
    assert all(cls.name == name for name, cls in {**backends.LOCAL_FACTORIES,
                                                  **backends.PROCESS_GROUP_FACTORIES}.items())
