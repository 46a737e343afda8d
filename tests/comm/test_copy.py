"""gpucomm.comm._copy: aliasing checks that make out= safe to alias inputs."""

from __future__ import annotations

import torch

from gpucomm.comm import _copy


def test_overlaps_and_protect():
    base = torch.arange(10.0)
    a, b = base[:5], base[5:]
    assert not _copy.overlaps(a, b)
    assert _copy.overlaps(base[2:7], a)
    assert not _copy.overlaps(torch.empty(0), base)
    pairs = _copy.protect([(a, a), (b, base[3:8])], [a, b])
    assert len(pairs) == 1  # the self-copy is dropped
    dst, src = pairs[0]
    assert dst is b and src.data_ptr() != base.data_ptr() + 3 * 4  # the overlapped source was cloned
    assert torch.equal(src, torch.arange(3.0, 8.0))


def test_copy_many_copies_and_keeps_autograd_and_conjugates(monkeypatch):
    from gpucomm.comm import _copy as cp

    k = cp.FOREACH_MIN_COPIES  # big enough a batch for the fused call
    batched = []
    real = cp._FOREACH_COPY
    monkeypatch.setattr(cp, "_FOREACH_COPY", lambda d, s, **kw: (batched.append(len(d)), real(d, s, **kw)))
    srcs = [torch.arange(3.0) + i for i in range(k)]
    dsts = [torch.zeros(3) for _ in range(k)]
    cp.copy_many(dsts, srcs)
    assert batched == [k] and all(torch.equal(d, s) for d, s in zip(dsts, srcs, strict=True))
    leaf = torch.ones(3, requires_grad=True)
    outs = [torch.zeros(3) for _ in range(k)]
    cp.copy_many(outs, [leaf * (i + 1) for i in range(k)])  # no foreach formula: copy_ records the graph
    sum(o.sum() for o in outs).backward()
    assert leaf.grad.tolist() == [k * (k + 1) / 2] * 3
    z = torch.tensor([1 + 2j, 3 - 1j])
    got = [torch.zeros(2, dtype=torch.complex64) for _ in range(k)]
    cp.copy_many(got, [z.conj()] * k)  # conjugate views take copy_, which resolves them
    assert all(torch.equal(g, torch.tensor([1 - 2j, 3 + 1j])) for g in got)
    assert batched == [k]  # neither of the last two was batched


def test_copy_many_loops_for_large_copies(monkeypatch):
    from gpucomm.comm import _copy as cp

    k = cp.FOREACH_MIN_COPIES
    batched = []
    monkeypatch.setattr(cp, "_FOREACH_COPY", lambda d, s, **kw: batched.append(len(d)))
    monkeypatch.setattr(cp, "FOREACH_MAX_BYTES", 3 * 4)  # three float32s: the first batch fuses, the second not
    small = [torch.zeros(3) for _ in range(k)]
    cp.copy_many(small, [torch.ones(3)] * k)
    big = [torch.zeros(4) for _ in range(k)]
    cp.copy_many(big, [torch.ones(4)] * k)
    assert batched == [k]
    assert all(torch.equal(b, torch.ones(4)) for b in big)


def test_overlapping_pair_is_exact_for_chunks_and_never_misses_a_shared_element():
    import itertools
    import random

    from gpucomm.comm._copy import _share_an_element, overlapping_pair

    b = torch.zeros(6, 4)
    assert overlapping_pair(list(b.chunk(4, 1))) is None  # interleaved columns: spans overlap, elements do not
    assert overlapping_pair([b[::2], b[1::2]]) is None
    assert overlapping_pair([b[:, :3], b[:, 2:]]) == (0, 1)
    assert overlapping_pair([b[:2], b[:2]]) == (0, 1) and overlapping_pair([b[:2], b[:2]], same_view_ok=True) is None
    assert overlapping_pair([torch.zeros(0), torch.zeros(0)]) is None
    rng, base = random.Random(0), torch.zeros(400)
    for _ in range(2000):  # against the element sets themselves
        nd = rng.randint(1, 3)
        st = tuple(rng.choice([1, 2, 3, 5, 8, 12]) for _ in range(nd))
        sa, sb = (tuple(rng.randint(1, 4) for _ in range(nd)) for _ in range(2))
        oa, ob = rng.randint(0, 20), rng.randint(0, 20)
        elements = [{o + sum(i * s for i, s in zip(ix, st, strict=True))
                     for ix in itertools.product(*map(range, shape))} for o, shape in ((oa, sa), (ob, sb))]
        if elements[0] & elements[1]:
            assert _share_an_element(base.as_strided(sa, st, oa), base.as_strided(sb, st, ob)), (sa, sb, st, oa, ob)
