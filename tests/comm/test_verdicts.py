"""gpucomm.comm._verdicts: a repeated plain call skips its checks; any change the checks read re-checks."""

from __future__ import annotations

import gc
import weakref

import pytest
import torch

import gpucomm.comm as c
from gpucomm.comm import _verdicts


@pytest.fixture(autouse=True)
def _fresh_cache():
    _verdicts.clear()
    yield
    _verdicts.clear()


def _bufs(n=4, size=8):
    return [torch.full((size,), float(i + 1)) for i in range(n)], [torch.empty(size) for _ in range(n)]


def _key(ts, outs, op="sum"):
    return _verdicts.signature("all_reduce", (op,), ts, outs)


def test_a_repeated_call_reuses_the_verdict_and_still_computes():
    ts, outs = _bufs()
    c.all_reduce(ts, out=outs)
    assert _verdicts.verdict(_key(ts, outs)) is not None
    ts[0].fill_(100.0)  # values are not metadata: the verdict stands and the data is read afresh
    c.all_reduce(ts, out=outs)
    assert all(o.tolist() == [109.0] * 8 for o in outs)


def test_the_cached_path_is_taken(monkeypatch):
    ts, outs = _bufs()
    c.all_reduce(ts, out=outs)
    calls = []
    real = c._reductions.check_all_reduce
    monkeypatch.setattr(c._reductions, "check_all_reduce", lambda *a: calls.append(1) or real(*a))
    c.all_reduce(ts, out=outs)
    assert calls == []
    c.all_reduce(ts, "max", out=outs)  # another op: another key, checked
    assert calls == [1]


def test_a_resized_output_is_rechecked_with_the_same_error():
    ts, outs = _bufs()
    c.all_reduce(ts, out=outs)
    outs[2].resize_(3)
    with pytest.raises(ValueError, match=r"out\[2\]: expected shape \[8\]"):
        c.all_reduce(ts, out=outs)


def test_a_new_dtype_or_a_new_tensor_is_rechecked():
    ts, outs = _bufs()
    c.all_reduce(ts, out=outs)
    outs[1] = torch.empty(8, dtype=torch.float64)
    with pytest.raises(ValueError, match=r"out\[1\]: expected dtype torch.float32"):
        c.all_reduce(ts, out=outs)
    ts2, outs2 = _bufs()
    ts2[3] = ts2[3].to(torch.int32)
    with pytest.raises(ValueError):
        c.all_reduce(ts2, out=outs2)


def test_an_output_repointed_into_an_input_is_rechecked_for_overlap():
    ts, outs = _bufs(size=16)
    ts[0] = torch.ones(17)[:16]  # room in its storage for a view shifted by one element
    c.all_reduce(ts, out=outs)
    outs[1].set_(ts[0].untyped_storage(), 1, (16,))  # same object, now partly overlapping tensors[0]
    with pytest.raises(ValueError, match="partly overlaps"):
        c.all_reduce(ts, out=outs)
    assert _key(ts, outs) != _key(*_bufs(size=16))


def test_requires_grad_and_grad_mode_are_part_of_the_key():
    ts, outs = _bufs()
    c.all_reduce(ts, out=outs)
    ts[0].requires_grad_(True)
    with pytest.raises(ValueError, match="does not require grad"):
        c.all_reduce(ts, out=outs)
    with torch.no_grad():
        c.all_reduce(ts, out=outs)  # legal without grad mode, and that verdict does not leak into grad mode
    with pytest.raises(ValueError, match="does not require grad"):
        c.all_reduce(ts, out=outs)


def test_the_device_and_the_container_are_part_of_the_key():
    ts, outs = _bufs()
    meta = [t.to("meta") for t in ts]
    assert _key(ts, outs) != _key(meta, [o.to("meta") for o in outs])
    assert _key(ts, outs) != _key(tuple(ts), outs)
    assert _key(ts, outs) != _key(ts, None) and _key(ts, None) is not None


def test_failures_are_never_cached():
    ts, outs = _bufs()
    outs[0] = torch.empty(5)
    for _ in range(2):
        with pytest.raises(ValueError, match=r"out\[0\]"):
            c.all_reduce(ts, out=outs)
    assert _verdicts.verdict(_key(ts, outs)) is None


def test_unkeyable_calls_are_checked_in_full():
    ts, outs = _bufs()
    assert _verdicts.signature("all_reduce", ("sum",), iter(ts), None) is None
    assert _verdicts.signature("all_reduce", (["sum"],), ts, None) is None  # unhashable op
    sparse = [t.to_sparse() for t in ts]
    assert _verdicts.signature("all_reduce", ("sum",), sparse, None) is None
    for _ in range(2):  # refused by name every time
        with pytest.raises(ValueError, match=r"tensors\[0\]: expected a dense \(strided\) tensor"):
            c.all_reduce(sparse)

    class Sub(torch.Tensor):
        pass

    assert _verdicts.signature("all_reduce", ("sum",), [t.as_subclass(Sub) for t in ts], None) is None


def test_the_cache_is_bounded_and_holds_no_tensor(monkeypatch):
    monkeypatch.setattr(_verdicts, "MAX_ENTRIES", 3)
    ts, outs = _bufs()
    ref = weakref.ref(outs[0])
    for op in ("sum", "max", "min", "prod", "avg"):
        c.all_reduce(ts, op, out=outs)
    assert len(_verdicts._CACHE) == 3
    assert _verdicts.verdict(_key(ts, outs, "sum")) is None  # the oldest went first
    assert _verdicts.verdict(_key(ts, outs, "avg")) is not None
    del outs
    gc.collect()
    assert ref() is None


def test_all_gather_and_reduce_scatter_recheck_a_changed_output():
    ts, _ = _bufs()
    g = [torch.empty(32) for _ in range(4)]
    c.all_gather(ts, out=g)
    c.all_gather(ts, out=g)
    assert all(x.tolist() == torch.cat(ts).tolist() for x in g)
    g[3].resize_(31)
    with pytest.raises(ValueError, match=r"out\[3\]"):
        c.all_gather(ts, out=g)
    r = [torch.empty(2) for _ in range(4)]
    c.reduce_scatter(ts, out=r)
    c.reduce_scatter(ts, out=r)
    assert [x.tolist() for x in r] == [[10.0, 10.0]] * 4
    c.reduce_scatter(ts, 0, "max", out=r)
    assert [x.tolist() for x in r] == [[4.0, 4.0]] * 4
    r[0] = torch.empty(2, dtype=torch.float16)
    with pytest.raises(ValueError, match=r"out\[0\]"):
        c.reduce_scatter(ts, out=r)


def test_an_option_equal_as_a_key_but_of_another_type_is_rechecked():
    ts, _ = _bufs()
    g = [torch.empty(32) for _ in range(4)]
    c.all_gather(ts, 0, out=g)
    for bad in (False, 0.0):  # False == 0 == 0.0 as dict keys; the dim check refuses both by name
        with pytest.raises(TypeError, match="dim"):
            c.all_gather(ts, bad, out=g)


def test_in_place_calls_are_keyed_once_and_apart_from_separate_outputs():
    ts, outs = _bufs()
    in_place = _key(ts, list(ts))
    assert in_place != _key(ts, outs) and in_place != _key(ts, None)
    assert len(in_place) < len(_key(ts, outs))  # the tensors once, not twice
    c.all_reduce(ts, out=list(ts))
    assert _verdicts.verdict(_key(ts, list(ts))) is not None and _verdicts.verdict(_key(ts, outs)) is None
    assert all(t.tolist() == [10.0] * 8 for t in ts)
