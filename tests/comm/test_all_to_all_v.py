"""gpucomm.comm.all_to_all_v on CPU: the uneven exchange against torch.cat of hand-cut pieces, and its errors."""

from __future__ import annotations

import pytest
import torch

from gpucomm.comm import all_to_all_v


def test_uneven_pieces_land_in_participant_order():
    a = torch.arange(3.0).reshape(3, 1)        # participant 0 sends 0 rows to itself, 3 to participant 1
    b = torch.arange(10.0, 13.0).reshape(3, 1)  # participant 1 sends 1 row to participant 0, 2 to itself
    got = all_to_all_v([a, b], [[0, 3], [1, 2]])
    assert torch.equal(got[0], torch.tensor([[10.0]]))
    assert torch.equal(got[1], torch.tensor([[0.0], [1.0], [2.0], [11.0], [12.0]]))


@pytest.mark.parametrize("n", [1, 2, 3, 5])
def test_matches_a_cut_and_cat_by_hand(n):
    g = torch.Generator().manual_seed(n)
    sizes = [[int(v) for v in torch.randint(0, 4, (n,), generator=g)] for _ in range(n)]
    ts = [torch.randn(sum(row), 2, generator=g) for row in sizes]
    want = [torch.cat([ts[i][sum(sizes[i][:j]):sum(sizes[i][:j + 1])] for i in range(n)]) for j in range(n)]
    out = [torch.full((sum(sizes[i][j] for i in range(n)), 2), -1.0) for j in range(n)]
    assert all_to_all_v(ts, sizes, out=out) is not None
    for j in range(n):
        assert torch.equal(out[j], want[j])
        assert torch.equal(all_to_all_v(ts, sizes)[j], want[j])


@pytest.mark.parametrize(("sizes", "error", "needle"), [
    ("x", TypeError, "split_sizes: expected a list"),
    ([[1, 3]], ValueError, "split_sizes: expected 2 rows"),
    ([[1, 3], [2]], ValueError, r"split_sizes\[1\]: expected 2 sizes"),
    ([[1, 2], [2, 2]], ValueError, r"split_sizes\[0\]: expected sizes summing to tensors\[0\]'s dim 0 \(4\)"),
    ([[1, 3.0], [2, 2]], TypeError, r"split_sizes\[0\]\[1\]: expected an int"),
    ([[-1, 5], [2, 2]], ValueError, r"split_sizes\[0\]\[0\]: expected a non-negative"),
])
def test_bad_split_sizes_name_the_argument(sizes, error, needle):
    with pytest.raises(error, match=needle):
        all_to_all_v([torch.zeros(4), torch.zeros(4)], sizes)


def test_bad_out_is_refused_before_anything_is_written():
    ts = [torch.arange(4.0), torch.arange(4.0)]
    with pytest.raises(ValueError, match=r"out\[0\]: expected shape \[3\]"):
        all_to_all_v(ts, [[1, 3], [2, 2]], out=ts)
    out = [torch.full((3,), -1.0), torch.full((5,), -1.0)]
    with pytest.raises(ValueError, match=r"out\[1\]: expected shape \[5\]|overlap"):
        all_to_all_v(ts, [[1, 3], [2, 2]], out=[out[0], ts[1][:1].expand(5)])
    assert (out[0] == -1).all()


def test_prepared_all_to_all_v_reruns_with_new_contents_and_refuses_at_prepare_time():
    import gpucomm.comm as gc

    sizes = [[1, 2, 0], [0, 1, 2], [2, 0, 1]]
    ts = [torch.arange(3.0) + 10 * i for i in range(3)]
    p = gc.prepare("all_to_all_v", ts, split_sizes=sizes)
    for step in range(2):
        for i, t in enumerate(ts):
            t.copy_(torch.arange(3.0) + 10 * i + step)
        got = p()
        assert got is p.outputs
        assert all(torch.equal(a, b) for a, b in zip(got, all_to_all_v(ts, sizes), strict=True))
    with pytest.raises(ValueError, match=r"split_sizes\[0\]: expected sizes summing"):
        gc.prepare("all_to_all_v", ts, split_sizes=[[1, 1, 0], [0, 1, 2], [2, 0, 1]])


def test_every_library_offers_all_to_all_v_from_its_row():
    from gpucomm import collectives
    from gpucomm.bench.backends import BACKENDS
    from gpucomm.communicator import Communicator, methods

    row = collectives.get("all_to_all_v")
    assert "all_to_all_v" in methods() and callable(Communicator.all_to_all_v)
    offered = {name for name, b in BACKENDS.items() if row.calls.why_not(b.library) is None}
    assert offered == {"gpucomm.comm", "torch.distributed", "gpucomm.dist"}  # torch.cuda.comm has none
