"""Runtime adapters: forms offered by what the library has, the row's call bound plain or prepared."""

from __future__ import annotations

import pytest
import torch
from bench_doubles import PreparingBackend, ReferenceBackend

from gpucomm.bench.buffers import OUT_OF_PLACE, allocate, fill, plan_case
from gpucomm.collectives import CollectiveName as C
from gpucomm.collectives.spec import Invocation

CPU = [torch.device("cpu")] * 3


def test_forms_follow_the_library_and_the_device():
    assert ReferenceBackend(CPU).forms == ("plain",)  # no prepare(): plain calls only
    assert PreparingBackend(CPU).forms == ("plain", "prepared")  # no graph form on CPU


def test_bind_plain_and_prepared_run_the_rows_call():
    backend = PreparingBackend(CPU)
    case = plan_case(C.SEND_RECV, 48, 3, torch.float32, None, OUT_OF_PLACE)
    bufs = allocate(case, [0, 1, 2], CPU)
    inv = backend.invocation(case, bufs)
    assert inv.name == "send_recv" and inv.args == (bufs.outputs, bufs.inputs)
    for form in ("plain", "prepared"):
        fill(case, bufs, [0, 1, 2])
        backend.bind(inv, form)()
        assert torch.equal(bufs.outputs[1], bufs.inputs[0])
    with pytest.raises(ValueError, match="form 'graph' is not offered here"):
        backend.bind(inv, "graph")


def test_an_allocated_result_is_checked_in_the_roots_slot():
    backend = ReferenceBackend(CPU)
    case = plan_case(C.REDUCE, 48, 3, torch.float32, None, OUT_OF_PLACE, root=2)
    bufs = allocate(case, [0, 1, 2], CPU)
    result = torch.zeros(4)
    inv = Invocation("reduce_add", print, returns_output=True)
    assert backend.outputs(case, bufs, inv, result) == [None, None, result]
    assert backend.outputs(case, bufs, Invocation("reduce", print), None) is bufs.outputs


def test_all_to_all_v_runs_through_the_communicator_plain_and_prepared():
    from gpucomm.bench.adapters import GpucommComm
    from gpucomm.bench.check import count_wrong, expected

    backend = GpucommComm(CPU)
    assert backend.forms == ("plain", "prepared")
    case = plan_case(C.ALL_TO_ALL_V, 3 * 3 * 4 * 4, 3, torch.float32, None, OUT_OF_PLACE)
    bufs = allocate(case, [0, 1, 2], CPU)
    inv = backend.invocation(case, bufs)
    assert inv.name == "all_to_all_v"
    for form in ("plain", "prepared"):
        fill(case, bufs, [0, 1, 2])
        backend.bind(inv, form)()
        for q, out in enumerate(bufs.outputs):
            want = expected(case.op, q, n=3, count=case.count, dtype=torch.float32, reduce_op=None, root=0)
            assert count_wrong(out, want, None) == 0, (form, q)
