"""The spec table against nccl-tests' definitions (collective-bench.md §1.1), for n = 1..8."""

from __future__ import annotations

import pytest

from gpucomm import collectives as C
from gpucomm.collectives import CollectiveName as N
from gpucomm.testing.markers import requires_gpus

# nccl-tests' busbw factors, written out independently of the table: src/<coll>.cu *GetBw.
NCCL_TESTS_FACTOR = {
    N.ALL_REDUCE: lambda n: 2 * (n - 1) / n,
    N.ALL_GATHER: lambda n: (n - 1) / n,
    N.REDUCE_SCATTER: lambda n: (n - 1) / n,
    N.ALL_TO_ALL: lambda n: (n - 1) / n,
    N.SCATTER: lambda n: (n - 1) / n,
    N.GATHER: lambda n: (n - 1) / n,
    N.BROADCAST: lambda n: 1.0,
    N.REDUCE: lambda n: 1.0,
    N.SEND_RECV: lambda n: 1.0,
}


def test_table_covers_every_collective_once():
    assert set(C.COLLECTIVES) == set(N)
    assert C.names() == [c.value for c in C.COLLECTIVES]
    assert all(C.COLLECTIVES[name].name is name for name in C.COLLECTIVES)


@pytest.mark.parametrize("name", list(NCCL_TESTS_FACTOR))  # the collectives nccl-tests has
@pytest.mark.parametrize("n", range(1, 9))
def test_busbw_factor_matches_nccl_tests(name, n):
    assert C.get(name).busbw_factor(n) == pytest.approx(NCCL_TESTS_FACTOR[name](n), abs=0, rel=1e-15)


def test_worked_bandwidths():
    # 1 GiB all_reduce over 8 participants in 4 ms: algbw 268.435456 GB/s, busbw × 14/8.
    ar = C.get("all_reduce")
    assert ar.algbw(1 << 30, 4e-3) == pytest.approx(268.435456)
    assert ar.busbw(1 << 30, 4e-3, 8) == pytest.approx(268.435456 * 1.75)
    assert C.get("broadcast").busbw(1000, 1e-6, 8) == pytest.approx(1.0)
    assert C.get("all_gather").wire_bytes(800, 8) == pytest.approx(700.0)


@pytest.mark.parametrize("n", range(1, 9))
def test_buffer_sizes_follow_nccl_tests(n):
    size = 4096 * 8
    chunk = size // n
    expect = {  # (input bytes, output bytes) on the root / any participant
        N.ALL_REDUCE: (size, size), N.BROADCAST: (size, size), N.REDUCE: (size, size),
        N.SEND_RECV: (size, size), N.ALL_TO_ALL: (size, size),
        N.ALL_GATHER: (chunk, size), N.GATHER: (chunk, size),
        N.REDUCE_SCATTER: (size, chunk), N.SCATTER: (size, chunk),
    }
    for name, (inp, out) in expect.items():
        c = C.get(name)
        assert (c.input_nbytes(size, n), c.output_nbytes(size, n)) == (inp, out), name
        assert c.algbw_bytes(size) == size


def test_rooted_buffers_absent_off_root():
    assert C.get("gather").output_nbytes(64, 4, is_root=False) == 0
    assert C.get("scatter").input_nbytes(64, 4, is_root=False) == 0
    assert C.get("broadcast").input_nbytes(64, 4, is_root=False) == 0
    assert C.get("reduce").output_nbytes(64, 4, is_root=False) == 0


def test_roots_and_reductions():
    rooted = {c.name for c in C.COLLECTIVES.values() if c.has_root}
    reducing = {c.name for c in C.COLLECTIVES.values() if c.reduces}
    assert rooted == {N.BROADCAST, N.REDUCE, N.SCATTER, N.GATHER}
    assert reducing == {N.REDUCE, N.ALL_REDUCE, N.REDUCE_SCATTER}


@pytest.mark.parametrize("n", range(1, 9))
def test_output_shapes(n):
    assert C.get("all_gather").output_shape([3, 5], n) == (3 * n, 5)
    assert C.get("gather").output_shape([3, 5], n, dim=1) == (3, 5 * n)
    assert C.get("reduce_scatter").output_shape([2 * n, 5], n) == (2, 5)
    assert C.get("scatter").output_shape([4, 3 * n], n, dim=-1) == (4, 3)
    for name in (N.ALL_REDUCE, N.BROADCAST, N.REDUCE, N.ALL_TO_ALL, N.SEND_RECV):
        assert C.get(name).output_shape([7, 2], n) == (7, 2)


def test_shape_errors_are_clear():
    with pytest.raises(ValueError, match="does not divide into n=3"):
        C.get("reduce_scatter").output_shape([4], 3)
    with pytest.raises(ValueError, match="dim=2 is out of range"):
        C.get("all_gather").output_shape([4, 4], 2, dim=2)
    with pytest.raises(ValueError, match="0-dim"):
        C.get("scatter").output_shape([], 2)


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "8"])
def test_bad_participant_count(bad):
    with pytest.raises(ValueError, match="n >= 1"):
        C.get("all_reduce").busbw_factor(bad)


def test_bad_size_and_time():
    with pytest.raises(ValueError, match="non-negative number of bytes"):
        C.get("all_reduce").algbw(-1, 1.0)
    with pytest.raises(ValueError, match="positive time"):
        C.get("all_reduce").algbw(8, 0.0)


def test_unknown_collective_lists_valid_names():
    with pytest.raises(ValueError, match="unknown collective 'allreduce'.*all_reduce"):
        C.get("allreduce")


@pytest.mark.parametrize("spelling", ["sum", "SUM", "Sum", C.ReduceOp.SUM])
def test_parse_op_spellings(spelling):
    assert C.parse_op(spelling) is C.ReduceOp.SUM


def test_parse_op_accepts_torch_distributed_ops():
    import torch.distributed as dist

    assert C.parse_op(dist.ReduceOp.MAX) is C.ReduceOp.MAX


def test_parse_op_rejects_unknown():
    with pytest.raises(ValueError, match="unknown reduction op 'mean'.*'avg'"):
        C.parse_op("mean")
    with pytest.raises(TypeError, match="expected a str"):
        C.parse_op(3)


def test_rows_are_discovered_in_order_with_legends():
    rows = list(C.COLLECTIVES.values())
    assert [r.order for r in rows] == sorted(r.order for r in rows)
    assert C.get("all_reduce").legend == "busbw = algbw × 2(n-1)/n"
    assert C.get("gather").factor.value == "(n-1)/n"
    assert str(N.ALL_REDUCE) == "all_reduce" and N("send_recv") is N.SEND_RECV


def test_the_table_imports_no_torch():
    import subprocess
    import sys

    code = "import sys, gpucomm.collectives; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def _dist_calls_body() -> list[str]:
    """Every row's torch.distributed and gpucomm.dist call on this rank; one line per wrong output."""
    import importlib.util
    from pathlib import Path

    import torch.distributed as td

    import gpucomm.dist as gd

    path = Path(__file__).parent / "collectives" / "_harness.py"
    spec = importlib.util.spec_from_file_location("collectives_harness_worker", path)
    harness = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(harness)
    rank, n, count = td.get_rank(), td.get_world_size(), 3
    problems = []
    for row in C.COLLECTIVES.values():
        for library, lib in (("torch_distributed", td), ("gpucomm_dist", gd)):
            if row.calls.get(library) is None:
                continue
            for placement in row.placements:
                for root in (range(n) if row.has_root else (0,)):
                    got = harness.run_call(row, library, lib, n, count, root, placement, rank=rank,
                                           participants=[rank], op=C.ReduceOp.SUM if row.reduces else None)
                    want = row.expected(rank, n, count, root, harness.ListData(n))
                    if want is not None and got[0] != want:
                        problems.append(f"{row.name} {library} {placement} root={root}: {got[0]} != {want}")
    return problems


@pytest.mark.slow
def test_every_rows_process_group_calls_on_gloo():
    from gpucomm.testing import check_ranks, spawn

    check_ranks(spawn(_dist_calls_body, world_size=3))


@requires_gpus(1)
def test_every_rows_torch_cuda_comm_call_on_one_gpu():
    import importlib.util
    from pathlib import Path

    import torch
    import torch.cuda.comm as tcomm

    path = Path(__file__).parent / "collectives" / "_harness.py"
    spec = importlib.util.spec_from_file_location("collectives_harness_gpu", path)
    harness = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(harness)
    n, count = 3, 4
    checked = 0
    for row in C.COLLECTIVES.values():
        if row.calls.torch_cuda_comm is None:
            continue
        for root in range(n) if row.has_root else (0,):
            got = harness.run_call(row, "torch_cuda_comm", tcomm, n, count, root, "out-of-place",
                                   op=C.ReduceOp.SUM if row.reduces else None, device="cuda:0")
            torch.cuda.synchronize()
            for q in range(n):
                want = row.expected(q, n, count, root, harness.ListData(n))
                assert want is None or got[q] == want, (row.name, root, q)
            checked += 1
    assert checked == 4 * n  # broadcast, reduce, scatter, gather from every root
