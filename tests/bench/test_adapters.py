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
