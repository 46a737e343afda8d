"""The row vocabulary: Calls say why a library has no call, Invocations bind and prepare, op names map."""

from __future__ import annotations

import pytest
import torch.distributed as td

from gpucomm.collectives import ReduceOp, parse_op
from gpucomm.collectives.spec import BACKEND_CALLS, Calls, Invocation, td_op


def test_a_missing_call_needs_a_reason():
    with pytest.raises(ValueError, match="gpucomm_dist is None without a reason"):
        Calls(torch_cuda_comm=None, unavailable={"torch_cuda_comm": "no"}, gpucomm_comm=print,
              torch_distributed=print, communicator=print)
    calls = Calls(gpucomm_comm=print, torch_distributed=print, gpucomm_dist=print, communicator=print,
                  unavailable={"torch_cuda_comm": "torch.cuda.comm has no such thing"})
    assert calls.why_not("torch_cuda_comm") == "torch.cuda.comm has no such thing"
    assert calls.why_not("gpucomm_comm", ReduceOp.MAX) is None
    with pytest.raises(ValueError, match="unknown library 'nccl'"):
        calls.get("nccl")
    assert set(BACKEND_CALLS) == {"torch_cuda_comm", "gpucomm_comm", "torch_distributed", "gpucomm_dist",
                                  "communicator"}


def test_invocation_binds_once_and_prepares_through_the_library():
    seen = []
    inv = Invocation("all_reduce", lambda *a, **k: seen.append((a, k)), (1, 2), {"op": "sum"})
    inv.bind()()
    assert seen == [((1, 2), {"op": "sum"})]

    class Lib:
        def prepare(self, name, /, *args, **kwargs):  # positional-only, as the real ones: a reduction has op=
            return ("prepared", name, args, kwargs)

    assert inv.prepared(Lib()) == ("prepared", "all_reduce", (1, 2), {"op": "sum"})


@pytest.mark.parametrize("op", list(ReduceOp))
def test_every_reduce_op_has_a_torch_distributed_twin(op):
    assert td_op(td, op) == getattr(td.ReduceOp, {"prod": "PRODUCT"}.get(op.value, op.name))
    assert td_op(td, None) == td.ReduceOp.SUM


def test_parse_op_takes_exact_names_and_members_and_refuses_the_rest():
    assert all(parse_op(o.value) is o and parse_op(o) is o for o in ReduceOp)
    assert parse_op("PRODUCT") is ReduceOp.PROD
    with pytest.raises(ValueError, match="unknown reduction op"):
        parse_op("mean")
    with pytest.raises(TypeError, match="op"):
        parse_op(3)
