"""The runner on CPU with a reference Communicator: every op checks out exactly; a broken one does not."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from bench_doubles import BrokenBackend, PreparingBackend, PreparingCommunicator, ReferenceBackend

from gpucomm import collectives
from gpucomm.bench.backends import BACKENDS
from gpucomm.bench.buffers import IN_PLACE, OUT_OF_PLACE, plan_case
from gpucomm.bench.config import BenchConfig
from gpucomm.bench.runner import measure, plan
from gpucomm.collectives import CollectiveName as C
from gpucomm.collectives import ReduceOp
from gpucomm.records import to_row, validate_row

CFG = BenchConfig(ops=tuple(C), backends=("gpucomm.comm",), sizes=(8, 4096), dtypes=(torch.float32,),
                  reduce_ops=(ReduceOp.SUM,), iters=3, warmup=1, check=1, device_type="cpu",
                  devices=(torch.device("cpu"),) * 3)


def test_plan_orders_points_and_respects_placements():
    points = plan(CFG, [BACKENDS["gpucomm.comm"]], 3, {"gpucomm.comm": ReferenceBackend(list(CFG.devices)).forms})
    ops = [p.case.op for p in points]
    assert ops == sorted(ops, key=list(C).index)  # op-major order
    placements = {(p.case.op, p.case.placement) for p in points}
    assert (C.ALL_GATHER, IN_PLACE) in placements and (C.ALL_GATHER, OUT_OF_PLACE) in placements
    assert (C.ALL_TO_ALL, IN_PLACE) not in placements and (C.ALL_REDUCE, OUT_OF_PLACE) not in placements
    assert all(p.case.size > 0 for p in points)  # 8 B all_gather over 3 participants is skipped, not zero


@pytest.mark.parametrize("op", [op for op in C if collectives.get(op).calls.communicator is not None])
@pytest.mark.parametrize("rop", [ReduceOp.SUM, ReduceOp.PROD, ReduceOp.MIN])
def test_reference_backend_is_exact_for_every_op(op, rop):
    backend = ReferenceBackend(list(CFG.devices))
    cfg = dataclasses.replace(CFG, reduce_ops=(rop,))
    for placement in backend.spec.placements_for(op):
        case = plan_case(op, 4096, 3, torch.bfloat16, rop, placement, root=1)
        record = measure(backend, case, cfg)
        assert record.wrong == 0, (op, placement)
        assert record.timing == "perf-counter" and record.iters == 3 and record.time_us_median > 0
        validate_row(to_row(record))


def test_broken_backend_rows_are_wrong():
    case = plan_case(C.ALL_REDUCE, 4096, 3, torch.float32, ReduceOp.SUM, IN_PLACE)
    record = measure(BrokenBackend(list(CFG.devices)), case, CFG)
    assert record.wrong == 3 * case.count  # every element of every participant is off by one


def test_check_off_means_minus_one():
    case = plan_case(C.ALL_REDUCE, 64, 3, torch.float32, ReduceOp.SUM, IN_PLACE)
    record = measure(BrokenBackend(list(CFG.devices)), case, dataclasses.replace(CFG, check=0))
    assert record.wrong == -1


def test_one_participant_rows_say_their_bandwidth_is_not_a_link_figure():
    one = plan_case(C.BROADCAST, 4096, 1, torch.float32, None, OUT_OF_PLACE, root=0)
    three = plan_case(C.BROADCAST, 4096, 3, torch.float32, None, OUT_OF_PLACE, root=0)
    cfg = dataclasses.replace(CFG, devices=(torch.device("cpu"),))
    assert "no data crosses a link" in measure(ReferenceBackend([torch.device("cpu")]), one, cfg).note
    assert "no data crosses a link" not in measure(ReferenceBackend(list(CFG.devices)), three, CFG).note


def test_plan_has_prepared_points_only_where_the_library_prepares():
    reference, preparing = ReferenceBackend(list(CFG.devices)), PreparingBackend(list(CFG.devices))
    assert reference.forms == ("plain",) and preparing.forms == ("plain", "prepared")
    spec = [BACKENDS["gpucomm.comm"]]
    plain_only = plan(CFG, spec, 3, {"gpucomm.comm": reference.forms})
    both = plan(CFG, spec, 3, {"gpucomm.comm": preparing.forms})
    assert {p.form for p in plain_only} == {"plain"}
    assert len(both) == 2 * len(plain_only)
    assert [p.form for p in both[:2]] == ["plain", "prepared"]  # side by side for one case


def test_prepared_rows_are_checked_and_labelled():
    backend = PreparingBackend(list(CFG.devices))
    before = PreparingCommunicator.prepared
    case = plan_case(C.ALL_GATHER, 4096, 3, torch.float32, None, IN_PLACE)
    record = measure(backend, case, CFG, form="prepared")
    assert PreparingCommunicator.prepared > before  # the prepared callable was what ran
    assert record.form == "prepared" and record.wrong == 0
    # on CPU its baseline (torch.cuda.comm) never runs: the note promises no comparison with it
    assert "torch.cuda.comm" not in record.note
    assert measure(backend, case, CFG).form == "plain"
    validate_row(to_row(record))


def test_graph_form_is_planned_only_under_eager_cuda_timing():
    all_forms = {"gpucomm.comm": ("plain", "prepared", "graph")}
    cuda = dataclasses.replace(CFG, device_type="cuda", ops=(C.ALL_REDUCE,))
    eager = plan(cuda, [BACKENDS["gpucomm.comm"]], 3, all_forms)
    assert [p.form for p in eager[:3]] == ["plain", "prepared", "graph"]
    captured = plan(dataclasses.replace(cuda, cuda_graph=True), [BACKENDS["gpucomm.comm"]], 3, all_forms)
    assert {p.form for p in captured} == {"plain", "prepared"}  # a graph is not captured inside a graph


def test_a_graph_that_cannot_be_captured_is_skipped_not_failed():
    from gpucomm.bench.runner import GraphCaptureError

    class NoCapture(PreparingBackend):
        def __init__(self, devices):
            super().__init__(devices)
            self.forms = (*self.forms, "graph")  # as on CUDA

        def bind(self, inv, form="plain"):
            if form == "graph":
                raise RuntimeError("operation not permitted when stream is capturing")
            return super().bind(inv, form)

    case = plan_case(C.ALL_REDUCE, 64, 3, torch.float32, ReduceOp.SUM, IN_PLACE)
    with pytest.raises(GraphCaptureError, match="not permitted"):
        measure(NoCapture(list(CFG.devices)), case, CFG, form="graph")
