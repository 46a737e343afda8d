"""gpucomm.comm.prepare: prepared result == plain result for every op, reruns see new contents, errors at prepare."""

from __future__ import annotations

import pytest
import torch

import gpucomm.comm as c
from gpucomm.testing.markers import requires_gpus


def _inputs(n: int, salt: int = 0) -> list[torch.Tensor]:
    return [torch.arange(12.0).reshape(6, 2) * (p + 1) + salt for p in range(n)]


def _calls(n: int, devices: list, salt: int = 0) -> list[tuple[str, object, dict]]:
    """(op, inputs, options) for every op prepare takes, built fresh (values depend on ``salt``)."""
    ts = _inputs(n, salt)
    return [
        ("broadcast", ts[0], {"devices": devices}),
        ("scatter", ts[0], {"devices": devices}),
        ("scatter", ts[0], {"devices": devices, "dim": 1} if n <= 2 else {"devices": devices}),
        ("gather", ts, {}),
        ("gather", ts, {"dim": 1}),
        ("reduce_add", ts, {}),
        ("reduce", ts, {"destination": devices[-1], "op": "max"}),
        ("all_reduce", ts, {"op": "avg"}),
        ("all_reduce", ts, {}),
        ("all_gather", ts, {"dim": 1}),
        ("reduce_scatter", [torch.cat([t] * n) for t in ts], {"op": "sum"}),
        ("all_to_all", [[t[:1] + j for j in range(n)] for t in ts], {}),
        ("send_recv", ts, {}),
    ]


def _same(a, b) -> bool:
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
    return type(a) is type(b) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_prepared_equals_plain_for_every_op(n):
    devices = ["cpu"] * n
    for op, inputs, options in _calls(n, devices):
        p = c.prepare(op, inputs, **options)
        got = p()
        want = getattr(c, op)(inputs, **options)
        assert _same(got, want), (op, options)
        assert p() is got, op  # the same output objects every call


@pytest.mark.parametrize("n", [2, 3])
def test_buffers_changed_between_calls_give_new_results(n):
    devices = ["cpu"] * n
    for op, inputs, options in _calls(n, devices):
        p = c.prepare(op, inputs, **options)
        p()
        fresh = _calls(n, devices, salt=5)  # the same calls, other values: written into the old buffers
        new_inputs = next(x for o, x, opt in fresh if o == op and opt == options)
        _copy_into(inputs, new_inputs)
        got = p()
        want = getattr(c, op)(new_inputs, **options)
        assert _same(got, want), (op, options)


def _copy_into(dst, src) -> None:
    if isinstance(dst, torch.Tensor):
        dst.copy_(src)
    else:
        for d, s in zip(dst, src, strict=True):
            _copy_into(d, s)


def test_prepared_out_and_in_place():
    ts = _inputs(3)
    want = c.all_reduce(ts)
    p = c.prepare("all_reduce", ts, ts)  # outputs = the inputs: in place
    assert all(a is b for a, b in zip(p(), ts, strict=True))
    assert all(torch.equal(t, w) for t, w in zip(ts, want, strict=True))
    out = torch.empty(18, 2)
    g = c.prepare("gather", ts, out)
    assert g() is out and torch.equal(out, torch.cat(ts))


def test_bad_arguments_raise_at_prepare_time():
    ts = _inputs(2)
    with pytest.raises(ValueError, match="op: expected one of"):
        c.prepare("allreduce", ts)
    with pytest.raises(TypeError, match="op: expected a collective's name"):
        c.prepare(None, ts)
    with pytest.raises(TypeError, match=r"'all_reduce' takes the options \['op'\], but got \['dim'\]"):
        c.prepare("all_reduce", ts, dim=0)
    with pytest.raises(ValueError, match="op: unknown reduction op"):
        c.prepare("all_reduce", ts, op="mean")
    with pytest.raises(ValueError, match=r"out\[1\]: expected shape \[6, 2\]"):
        c.prepare("all_reduce", ts, [torch.empty(6, 2), torch.empty(3)])
    with pytest.raises(ValueError, match="a size along dim 0 that divides into n=4"):
        c.prepare("reduce_scatter", [torch.ones(6)] * 4)
    with pytest.raises(TypeError, match="expected devices= or outputs="):
        c.prepare("broadcast", ts[0])
    with pytest.raises(TypeError, match="expected a destination device or out="):
        c.prepare("reduce", ts)
    with pytest.raises(ValueError, match="graph: expected graph=True only when every participant is on a CUDA"):
        c.prepare("all_reduce", ts, graph=True)


def test_reduce_add_of_one_input_is_that_input():
    t = torch.ones(3)
    p = c.prepare("reduce_add", [t])
    assert p() is t


@requires_gpus(1)
@pytest.mark.parametrize("op", ["all_reduce", "reduce", "all_gather", "reduce_scatter", "send_recv", "all_to_all"])
def test_graph_capture_replays_new_contents_on_repeated_cuda0(op):
    devices = [torch.device("cuda", 0)] * 3
    calls = {o: (x, opt) for o, x, opt in _calls(3, devices)}
    inputs, options = calls[op]
    inputs = _to(inputs, "cuda:0")
    if op == "reduce":
        options = {"destination": "cuda:0", "op": "max"}
    p = c.prepare(op, inputs, graph=True, **options)
    assert p.graphed
    for salt in (1, 7):
        _fill(inputs, salt)
        got = p()
        torch.cuda.synchronize()
        assert _same(_to(got, "cpu"), _to(getattr(c, op)(inputs, **options), "cpu")), (op, salt)


def _to(x, device):
    return x.to(device) if isinstance(x, torch.Tensor) else [_to(y, device) for y in x]


def _fill(x, salt):
    if isinstance(x, torch.Tensor):
        x.copy_(torch.arange(x.numel(), dtype=x.dtype, device=x.device).reshape(x.shape) + salt)
    else:
        for y in x:
            _fill(y, salt)
