"""LocalCommunicator: THE body (tests/communicator/_body.py) plain and prepared, its fast paths and errors."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

from gpucomm.comm import _kernels
from gpucomm.communicator import LocalCommunicator
from gpucomm.testing import check_ranks, requires_gpus

# THE shared body, loaded by path (importlib import mode; spawned ranks load this file the same way).
_SPEC = importlib.util.spec_from_file_location("communicator_body", Path(__file__).with_name("_body.py"))
_BODY = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(_BODY)
check_collectives = _BODY.check_collectives


# ----- LocalCommunicator ------------------------------------------------------------------------------
@pytest.mark.parametrize("n", [1, 2, 3, 4])
@pytest.mark.parametrize("prepared", [False, True], ids=["plain", "prepared"])
def test_local_communicator_on_cpu_devices(n, prepared):
    comm = LocalCommunicator(["cpu"] * n)
    assert (comm.n, comm.rank, comm.world_size, comm.participants) == (n, 0, 1, list(range(n)))
    check_ranks([check_collectives(comm, prepared)])


@requires_gpus(1)
@pytest.mark.parametrize("prepared", [False, True], ids=["plain", "prepared"])
def test_local_communicator_on_repeated_cuda0(prepared):
    check_ranks([check_collectives(LocalCommunicator(["cuda:0"] * 3), prepared)])


@requires_gpus(2)
def test_local_communicator_on_distinct_gpus():
    count = torch.cuda.device_count()
    check_ranks([check_collectives(LocalCommunicator(list(range(count))))])



@pytest.mark.parametrize("n", [2, 3, 4])
def test_local_communicator_through_torchs_loops(n, torch_loops):
    """Plain broadcast and scatter through torch's loops (CPU stand-ins that check as the real ones do), the
    held routes of gpucomm.comm._kernels, remembered from call to call: THE body's results."""
    comm = LocalCommunicator(["cpu"] * n)
    check_ranks([check_collectives(comm, False)])
    assert {"broadcast", "scatter"} <= set(torch_loops)


@requires_gpus(1)
def test_held_routes_run_torchs_own_loops_on_cuda():
    """The held routes hand torch's real C++ loops what they take (the CPU tests run stand-ins of them): the
    communicator's own methods, and the same routes made to say whether the loop took the call."""
    comm = LocalCommunicator(["cuda:0"] * 3)
    assert {"broadcast", "scatter"} <= set(vars(comm))  # the held routes are this instance's methods
    broadcast, scatter = (_kernels.held_route(name, comm._held_by) for name in ("broadcast", "scatter"))
    ts = [torch.full((4,), float(p), device="cuda:0") for p in range(3)]
    assert broadcast(ts, ts, 1) and broadcast(ts, ts, 1)  # checked, then remembered
    assert all(torch.equal(t, torch.ones(4, device="cuda:0")) for t in ts)
    assert comm.broadcast(ts, 0) == ts and comm.broadcast(ts, 0) == ts
    src, outs = torch.arange(6.0, device="cuda:0"), [torch.zeros(2, device="cuda:0") for _ in range(3)]
    assert scatter([None, src, None], outs, 1) and torch.equal(torch.cat(outs), src)
    assert comm.scatter(outs, [None, src.flip(0), None], 1) == tuple(outs) and torch.equal(torch.cat(outs), src.flip(0))
    ts[2].data = ts[1]  # two participants now share one storage: asked again, refused
    assert not broadcast(ts, ts, 0)
    assert not scatter([None, src, None], [outs[0], outs[1], torch.zeros(3, device="cuda:0")], 1)


@requires_gpus(2)
def test_a_held_route_asks_again_when_data_moves_a_tensor_to_another_gpu():
    comm = LocalCommunicator(["cuda:0", "cuda:1"])
    broadcast = _kernels.held_route("broadcast", comm._held_by)
    ts = [torch.ones(4, device="cuda:0"), torch.zeros(4, device="cuda:1")]
    assert broadcast(ts, ts, 0) and comm.broadcast(ts, 0) == ts
    ts[1].data = torch.zeros(4, device="cuda:0")  # the same tensor object, now on participant 0's device
    assert not broadcast(ts, ts, 0)
    with pytest.raises(ValueError, match=r"tensors\[1\]: expected a tensor on cuda:1"):
        comm.broadcast(ts, 0)


def test_a_communicator_with_held_routes_pickles_and_its_copy_routes_afresh(torch_loops):
    import pickle

    comm = LocalCommunicator(["cpu"] * 2)
    ts = [torch.ones(2), torch.zeros(2)]
    comm.broadcast(ts, 0)
    copy = pickle.loads(pickle.dumps(comm))
    assert copy.devices == comm.devices and vars(copy)["broadcast"] is not vars(comm)["broadcast"]
    assert copy.broadcast([torch.full((2,), 3.0), ts[1]], 0)[1].tolist() == [3.0, 3.0]
    assert torch_loops == ["broadcast", "broadcast"]


def _refusal(call):
    with pytest.raises((TypeError, ValueError)) as info:
        call()
    return type(info.value), str(info.value)


def test_remembered_calls_refuse_what_a_fresh_communicator_refuses(torch_loops):
    warm = LocalCommunicator(["cpu"] * 3)
    ts, src, outs = [torch.zeros(4) for _ in range(3)], torch.arange(6.0), [torch.zeros(2) for _ in range(3)]
    warm.broadcast(ts, 1)
    warm.scatter(outs, [None, src, None], 1)
    assert torch_loops == ["broadcast", "scatter"]
    meta = ts[2].clone()
    torch.utils.swap_tensors(meta, torch.empty(4, device="meta"))
    cases = [
        lambda c: c.broadcast([ts[0], ts[1], meta], 1),  # a participant on another device
        lambda c: c.broadcast(ts, 3),
        lambda c: c.broadcast(ts[:2], 1),
        lambda c: c.scatter(outs, [None, src.reshape(2, 3), None], 1),  # the source changed shape
        lambda c: c.scatter([outs[0], outs[1], torch.zeros(3)], [None, src, None], 1),
        lambda c: c.scatter(outs, [None, None, None], 1),
        lambda c: c.scatter([outs[0], outs[0][:], outs[2]], [None, src, None], 1),  # two outputs, one storage
        lambda c: c.scatter(outs, [None, src, None], True),  # a bool is not a participant index
        lambda c: c.scatter(outs, [src, src, src], -2),  # nor a negative one
        lambda c: c.broadcast(ts, True),
        lambda c: c.scatter(outs, [None, src, None, None], 1),  # n + 1 inputs
        lambda c: c.scatter((o for o in outs), [None, src, None], 1),  # an iterator is not a list of outputs
        lambda c: c.broadcast({0: ts[0], 1: ts[1], 2: ts[2]}, 1),  # nor a dict
    ]
    for case in cases:
        fresh = LocalCommunicator(["cpu"] * 3)
        assert _refusal(lambda c=warm, case=case: case(c)) == _refusal(lambda c=fresh, case=case: case(c))
    outs[1].resize_(1)  # the same storage, now a chunk too small
    assert _refusal(lambda: warm.scatter(outs, [None, src, None], 1))[1].startswith("outputs[1]: expected shape [2]")
    assert torch_loops == ["broadcast", "scatter"]


def test_a_subclass_that_defines_a_held_method_keeps_its_own(torch_loops):
    class Mine(LocalCommunicator):
        def broadcast(self, tensors, root=0):
            return "mine"

    comm, plain = Mine(["cpu"] * 2), LocalCommunicator(["cpu"] * 2)
    ts = [torch.ones(2), torch.zeros(2)]
    assert comm.broadcast(ts) == "mine" and "broadcast" not in vars(comm) and "scatter" in vars(comm)
    assert plain.broadcast(ts) == ts and plain.broadcast.__name__ == "broadcast" and plain.broadcast.__doc__
    assert torch_loops == ["broadcast"]


# ----- argument checks (no communication needed) --------------------------------------------------
def test_local_communicator_rejects_bad_arguments():
    comm = LocalCommunicator(["cpu", "cpu"])
    with pytest.raises(ValueError, match=r"tensors: expected 2 tensor\(s\)"):
        comm.all_reduce([torch.ones(2)])
    with pytest.raises(TypeError, match="wrap a single tensor"):
        comm.all_reduce(torch.ones(2))
    with pytest.raises(ValueError, match=r"root: expected a participant index in \[0, 2\)"):
        comm.broadcast([torch.ones(2), torch.ones(2)], root=2)
    with pytest.raises(ValueError, match=r"outputs\[0\]: expected shape \[4\]"):
        comm.all_gather([torch.ones(3), torch.ones(4)], [torch.ones(2), torch.ones(2)])
    with pytest.raises(ValueError, match="op='avg' needs a floating-point dtype"):
        comm.all_reduce([torch.ones(2, dtype=torch.int32)] * 2, "avg")
    with pytest.raises(ValueError, match="devices: expected at least one device"):
        LocalCommunicator([])


# ----- LocalCommunicator's one-round-of-checks fast paths: aliasing and the errors they defer --------
def test_local_communicator_fast_paths_handle_aliased_buffers():
    comm, n = LocalCommunicator(["cpu"] * 3), 3
    ins = [torch.arange(6.0).reshape(6, 1) * (p + 1) for p in range(n)]
    want = [torch.cat([ins[i].chunk(n)[j] for i in range(n)]) for j in range(n)]
    bufs = [t.clone() for t in ins]
    comm.all_to_all(bufs, bufs)  # in place: every piece must be read before it is overwritten
    assert all(torch.equal(b, w) for b, w in zip(bufs, want, strict=True))
    bufs = [t.clone() for t in ins]
    comm.send_recv(bufs, bufs)  # in place ring shift
    assert all(torch.equal(bufs[p], ins[(p - 1) % n]) for p in range(n))
    outs = [torch.zeros(6, 1) for _ in range(n)]
    for p in range(n):  # NCCL's in-place layout: input p is chunk p of output p
        outs[p].chunk(n)[p].copy_(ins[p].chunk(n)[0])
    comm.all_gather(outs, [o.chunk(n)[p] for p, o in enumerate(outs)])
    expected = torch.cat([ins[p].chunk(n)[0] for p in range(n)])
    assert all(torch.equal(o, expected) for o in outs)
    src = ins[1].clone()
    outs = [torch.zeros(2, 1), src.chunk(n)[2], torch.zeros(2, 1)]  # an output inside the source
    comm.scatter(outs, [None, src, None], root=1)
    assert all(torch.equal(o, ins[1].chunk(n)[p]) for p, o in enumerate(outs))
    dst = torch.zeros(6, 1)
    parts = [dst[2:4].clone(), dst[2:4], dst[4:6].clone()]  # an input inside the destination
    for p, t in enumerate(parts):
        t.fill_(p + 1)
    comm.gather([dst, None, None], parts, root=0)
    assert torch.equal(dst.flatten(), torch.tensor([1.0, 1, 2, 2, 3, 3]))
    ts = [torch.full((2,), float(p + 1)) for p in range(n)]
    comm.broadcast([ts[0], ts[0][:], ts[2]], root=0)  # an output that is a view of the source
    assert torch.equal(ts[2], torch.ones(2))


def test_local_communicator_defers_to_gpucomm_comm_errors():
    comm = LocalCommunicator(["cpu", "cpu"])
    f32, f64 = torch.ones(4), torch.ones(4, dtype=torch.float64)
    with pytest.raises(ValueError, match=r"tensors\[1\]: expected dtype torch.float32"):
        comm.all_reduce([f32, f64])
    with pytest.raises(ValueError, match=r"tensors\[1\]: expected dtype torch.float32"):
        comm.reduce([f32, f64], 1)
    with pytest.raises(ValueError, match=r"tensors\[1\]: expected shape \[4\]"):
        comm.reduce_scatter([torch.ones(2)] * 2, [torch.ones(4), torch.ones(6)])
    with pytest.raises(ValueError, match=r"out\[0\]: expected shape \[4\]"):
        comm.send_recv([torch.ones(2), torch.ones(4)], [torch.ones(2), torch.ones(4)])
    with pytest.raises(ValueError, match=r"out\[0\]: expected dtype torch.float32"):
        comm.all_gather([torch.ones(8, dtype=torch.float64)] * 2, [f32, f32])
    with pytest.raises(ValueError, match="complex"):
        comm.all_reduce([torch.ones(2, dtype=torch.complex64)] * 2, "max")
    with pytest.raises(ValueError, match=r"root: expected a participant index"):
        comm.gather([torch.ones(8), None], [f32, f32], root=-1)
    with pytest.raises(TypeError, match=r"inputs\[1\]: expected the root's tensor, but got None"):
        comm.scatter([torch.ones(2)] * 2, [f32, None], root=1)


# ----- prepared collectives -----------------------------------------------------------------------
def test_prepared_reruns_on_the_same_tensors_with_their_new_contents():
    comm = LocalCommunicator(["cpu"] * 3)
    ts = [torch.full((4,), float(p)) for p in range(3)]
    p = comm.prepare("all_reduce", ts, op="sum")
    p()
    assert all(torch.equal(t, torch.full((4,), 3.0)) for t in ts)
    for i, t in enumerate(ts):
        t.fill_(10.0 * (i + 1))
    p()
    assert all(torch.equal(t, torch.full((4,), 60.0)) for t in ts)
    outs, ins = [torch.zeros(6) for _ in range(3)], [torch.full((2,), float(p)) for p in range(3)]
    g = comm.prepare("all_gather", outs, ins)
    g()
    ins[1].fill_(7.0)
    g()
    assert torch.equal(outs[2], torch.tensor([0.0, 0, 7, 7, 2, 2]))


def test_prepare_raises_at_prepare_time():
    comm = LocalCommunicator(["cpu", "cpu"])
    with pytest.raises(ValueError, match="op: expected one of"):
        comm.prepare("all_reducee", [torch.ones(2)] * 2)
    with pytest.raises(TypeError, match="op: expected a collective method's name"):
        comm.prepare(3, [torch.ones(2)] * 2)
    with pytest.raises(ValueError, match=r"tensors: expected 2 tensor\(s\)"):
        comm.prepare("all_reduce", [torch.ones(2)])
    with pytest.raises(ValueError, match="op='avg' needs a floating-point dtype"):
        comm.prepare("all_reduce", [torch.ones(2, dtype=torch.int32)] * 2, op="avg")
    with pytest.raises(ValueError, match=r"tensors\[1\]: expected dtype torch.float32"):
        comm.prepare("all_reduce", [torch.ones(4), torch.ones(4, dtype=torch.float64)])
    with pytest.raises(ValueError, match=r"outputs\[0\]: expected shape \[4\]"):
        comm.prepare("all_gather", [torch.ones(3), torch.ones(4)], [torch.ones(2), torch.ones(2)])
    with pytest.raises(ValueError, match="graph: expected graph=True only when every participant is on a CUDA"):
        comm.prepare("all_reduce", [torch.ones(2)] * 2, graph=True)
    with pytest.raises(TypeError, match="graph: expected a bool"):
        comm.prepare("all_reduce", [torch.ones(2)] * 2, graph="yes")


def test_zero_size_reduce_scatter_gives_every_participant_an_empty_chunk():
    comm = LocalCommunicator(["cpu"] * 3)
    outs = [torch.full((0, 2), -1.0) for _ in range(3)]
    comm.reduce_scatter(outs, [torch.ones(0, 2)] * 3)
    assert [tuple(o.shape) for o in outs] == [(0, 2)] * 3
    comm.prepare("reduce_scatter", outs, [torch.ones(0, 2)] * 3)()


@requires_gpus(1)
@pytest.mark.parametrize("op", ["all_reduce", "broadcast", "reduce"])
def test_graph_captured_prepare_replays_with_new_contents(op):
    comm = LocalCommunicator(["cuda:0"] * 3)
    ts = [torch.full((1024,), float(p + 1), device="cuda:0") for p in range(3)]
    p = comm.prepare(op, ts, graph=True)
    for step in range(2):
        for i, t in enumerate(ts):
            t.fill_(float(10 * step + i + 1))
        want = [t.clone() for t in ts]
        plain = [t.clone() for t in ts]
        getattr(comm, op)(plain)
        p()
        torch.cuda.synchronize()
        assert all(torch.equal(a, b) for a, b in zip(ts, plain, strict=True)), (op, step, want)


def test_prepare_defers_odd_cases_to_gpucomm_comm_and_its_errors():
    comm = LocalCommunicator(["cpu", "cpu"])
    f32, f64 = torch.ones(4), torch.ones(4, dtype=torch.float64)
    with pytest.raises(ValueError, match=r"tensors\[1\]: expected dtype torch.float32"):
        comm.prepare("reduce", [f32, f64], 1)
    with pytest.raises(ValueError, match="complex"):
        comm.prepare("all_reduce", [torch.ones(2, dtype=torch.complex64)] * 2, "max")
    with pytest.raises(ValueError, match=r"out\[0\]: expected dtype torch.float32"):
        comm.prepare("all_gather", [torch.ones(8, dtype=torch.float64)] * 2, [f32, f32])
    dst = torch.zeros(4, dtype=torch.float64)  # broadcast casts, as copy_ does: comm's path, prepared
    src = torch.arange(4.0)
    p = comm.prepare("broadcast", [src, dst], 0)
    p()
    src.add_(1)
    p()
    assert torch.equal(dst, torch.arange(1.0, 5.0, dtype=torch.float64))


@pytest.mark.parametrize("name", ["scatter", "gather", "all_gather", "reduce_scatter"])
def test_the_one_pass_shape_rule_accepts_exactly_what_check_shapes_accepts(name):
    import itertools

    from gpucomm import collectives
    from gpucomm.communicator.checks import check_shapes
    from gpucomm.communicator.local import _shape_rule

    row = collectives.get(name)
    rule = _shape_rule(row)
    n = 2
    shapes = [(4,), (2,), (8,), (3,), (4, 3), (2, 3), (8, 3), (2, 2), (1,), (0,)]
    for root in (0, 1):
        for s_in, s_out, s_other in itertools.product(shapes, shapes, shapes):
            ins = [torch.zeros(s_in), torch.zeros(s_other if row.input_buffer != "root" else s_in)]
            outs = [torch.zeros(s_out), torch.zeros(s_other if row.output_buffer != "root" else s_out)]
            try:
                check_shapes(row, n, ins, outs, root)
                accepted = True
            except ValueError:
                accepted = False
            assert rule(n, ins, outs, root) == accepted, (name, root, s_in, s_out, s_other)
