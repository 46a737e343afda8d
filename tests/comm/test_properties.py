"""Property tests on CPU devices: random shapes, dtypes, participant counts 1-8 and dims.

The identities are stated with plain torch (cat, stack, sum, chunk); example counts are kept small
so the whole file runs in a few seconds.
"""

from __future__ import annotations

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import gpucomm.comm as c

SETTINGS = settings(max_examples=30, deadline=None)
MOVE_DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32,
               torch.int16, torch.uint8, torch.bool, torch.complex64]
SUM_DTYPES = [torch.float32, torch.float64, torch.int64, torch.int32]


@st.composite
def tensors(draw, dtypes=MOVE_DTYPES, min_dims=1):
    shape = draw(st.lists(st.integers(1, 5), min_size=min_dims, max_size=4))
    dtype = draw(st.sampled_from(dtypes))
    seed = draw(st.integers(0, 2**16))
    g = torch.Generator().manual_seed(seed)
    values = torch.randint(-8, 9, shape, generator=g)
    return values.to(dtype) if dtype is not torch.uint8 else values.abs().to(dtype)


def cpus(n):
    return ["cpu"] * n


@SETTINGS
@given(x=tensors(), n=st.integers(1, 8), data=st.data())
def test_gather_undoes_scatter(x, n, data):
    dim = data.draw(st.integers(-x.dim(), x.dim() - 1))
    parts = c.scatter(x, cpus(n), dim=dim)
    assert len(parts) == len(x.chunk(n, dim)) <= n
    assert torch.equal(c.gather(list(parts), dim), x)


@SETTINGS
@given(x=tensors(), n=st.integers(1, 8), data=st.data())
def test_scatter_with_chunk_sizes_matches_split(x, n, data):
    dim = data.draw(st.integers(0, x.dim() - 1))
    cuts = sorted(data.draw(st.lists(st.integers(0, x.shape[dim]), min_size=n - 1, max_size=n - 1)))
    sizes = [b - a for a, b in zip([0, *cuts], [*cuts, x.shape[dim]], strict=True)]
    parts = c.scatter(x, cpus(n), chunk_sizes=sizes, dim=dim)
    assert isinstance(parts, tuple) and len(parts) == n
    for p, want in zip(parts, x.split(sizes, dim), strict=True):
        assert torch.equal(p, want)


@SETTINGS
@given(x=tensors(), n=st.integers(1, 8))
def test_broadcast_gives_the_whole_tensor_everywhere(x, n):
    copies = c.broadcast(x, cpus(n))
    assert isinstance(copies, list) and len(copies) == n
    assert all(y is x for y in copies)  # every slot is on x's device, so every slot is x itself
    outs = c.broadcast(x, out=[torch.empty_like(x) for _ in range(n)])
    assert all(torch.equal(o, x) for o in outs)


@SETTINGS
@given(x=tensors(SUM_DTYPES), n=st.integers(1, 8), data=st.data())
def test_reduce_add_is_the_sum_and_all_reduce_repeats_it(x, n, data):
    ts = [x + i for i in range(n)]
    want = torch.stack(ts).sum(0).to(x.dtype)
    assert torch.equal(c.reduce_add(ts), want)
    op = data.draw(st.sampled_from(["sum", "max", "min", "prod"]))
    ref = {"sum": want, "max": torch.stack(ts).amax(0), "min": torch.stack(ts).amin(0),
           "prod": torch.stack(ts).prod(0).to(x.dtype)}[op]
    results = c.all_reduce(ts, op)
    assert len(results) == n and all(torch.equal(r, ref) for r in results)
    assert len({r.data_ptr() for r in results}) == n  # distinct tensors, not one shared result


@SETTINGS
@given(x=tensors(SUM_DTYPES), n=st.integers(1, 8), data=st.data())
def test_all_gather_of_reduce_scatter_is_all_reduce(x, n, data):
    dim = data.draw(st.integers(0, x.dim() - 1))
    shape = list(x.shape)
    shape[dim] *= n
    ts = [torch.arange(i, i + shape_numel(shape)).reshape(shape).to(x.dtype) for i in range(n)]
    pieces = c.reduce_scatter(ts, dim)
    assert all(p.shape[dim] == x.shape[dim] for p in pieces)
    gathered = c.all_gather(pieces, dim)
    full = c.all_reduce(ts)
    assert all(torch.equal(g, f) for g, f in zip(gathered, full, strict=True))
    assert torch.equal(gathered[0], torch.stack(ts).sum(0).to(x.dtype))


def shape_numel(shape):
    k = 1
    for s in shape:
        k *= s
    return k


@SETTINGS
@given(n=st.integers(1, 8), data=st.data())
def test_all_to_all_twice_is_the_identity(n, data):
    lists = [[data.draw(tensors()) for _ in range(n)] for _ in range(n)]
    once = c.all_to_all(lists)
    for i in range(n):
        for j in range(n):
            assert torch.equal(once[j][i], lists[i][j])
    twice = c.all_to_all(once)
    assert all(torch.equal(twice[i][j], lists[i][j]) for i in range(n) for j in range(n))


@SETTINGS
@given(x=tensors(SUM_DTYPES), n=st.integers(2, 8))
def test_in_place_all_reduce_and_all_to_all(x, n):
    ts = [x + i for i in range(n)]
    want = torch.stack(ts).sum(0).to(x.dtype)
    c.all_reduce(ts, out=ts)
    assert all(torch.equal(t, want) for t in ts)
    rows = [list((torch.arange(n) + 10 * i).chunk(n)) for i in range(n)]
    c.all_to_all(rows, out=rows)  # out aliases the inputs: the pieces are snapshotted first
    assert all(int(rows[j][i]) == 10 * i + j for i in range(n) for j in range(n))
