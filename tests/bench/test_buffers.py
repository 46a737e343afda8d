"""Buffer layouts: sizes rounded to whole chunks, in-place outputs alias their inputs."""

from __future__ import annotations

import pytest
import torch

from gpucomm.bench.buffers import (
    IN_PLACE,
    OUT_OF_PLACE,
    allocate,
    fill,
    plan_case,
    planned_nbytes,
    set_nbytes,
)
from gpucomm.bench.check import SENTINEL
from gpucomm.collectives import CollectiveName as C
from gpucomm.collectives import ReduceOp

CPU = [torch.device("cpu")] * 3


def test_chunked_sizes_round_down_to_whole_chunks():
    case = plan_case(C.ALL_GATHER, 100, 3, torch.float32, None, OUT_OF_PLACE)
    assert (case.count, case.size) == (8, 96)  # 8 floats per chunk, 3 chunks
    assert plan_case(C.ALL_GATHER, 8, 3, torch.float32, None, OUT_OF_PLACE) is None  # empty chunk: skipped
    full = plan_case(C.ALL_REDUCE, 10, 3, torch.float32, ReduceOp.SUM, IN_PLACE)
    assert (full.count, full.size, full.root) == (2, 8, None)
    rooted = plan_case(C.BROADCAST, 64, 3, torch.bfloat16, ReduceOp.SUM, IN_PLACE, root=2)
    assert (rooted.count, rooted.reduce_op, rooted.root) == (32, None, 2)


def test_in_place_all_gather_input_is_own_chunk_of_output():
    case = plan_case(C.ALL_GATHER, 48, 3, torch.float32, None, IN_PLACE)
    bufs = allocate(case, [0, 1, 2], CPU)
    for p, (inp, out) in enumerate(zip(bufs.inputs, bufs.outputs, strict=True)):
        assert inp.data_ptr() == out.data_ptr() + p * case.count * 4
    fill(case, bufs, [0, 1, 2])
    assert (bufs.outputs[1][:case.count] == SENTINEL).all()  # other chunks hold the sentinel
    assert (bufs.outputs[1][case.count:2 * case.count] != SENTINEL).all()


def test_in_place_reduce_scatter_output_is_own_chunk_of_input():
    case = plan_case(C.REDUCE_SCATTER, 48, 3, torch.float32, ReduceOp.SUM, IN_PLACE)
    bufs = allocate(case, [0, 1, 2], CPU)
    assert bufs.outputs[2].data_ptr() == bufs.inputs[2].data_ptr() + 2 * case.count * 4
    assert set_nbytes(bufs) == 3 * 48  # views are not counted twice


def test_rooted_buffers_exist_only_where_the_op_has_them():
    scatter = allocate(plan_case(C.SCATTER, 48, 3, torch.float32, None, OUT_OF_PLACE, root=1), [0, 1, 2], CPU)
    assert [t is None for t in scatter.inputs] == [True, False, True]
    gather = allocate(plan_case(C.GATHER, 48, 3, torch.float32, None, OUT_OF_PLACE), [0, 1, 2], CPU)
    assert [t is None for t in gather.outputs] == [False, True, True]


@pytest.mark.parametrize("op", list(C))
@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_rows_declare_the_bytes_their_buffers_hold(op, n):
    from gpucomm import collectives

    row = collectives.get(op)
    for placement in {*row.placements, OUT_OF_PLACE}:
        for root in range(n) if row.has_root else (0,):
            case = plan_case(op, 96 * n, n, torch.float32, ReduceOp.SUM, placement, root=root)
            bufs = allocate(case, list(range(n)), [torch.device("cpu")] * n)
            assert planned_nbytes(case, list(range(n))) == set_nbytes(bufs), (placement, root)
