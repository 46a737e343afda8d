"""One test body for every Communicator: LocalCommunicator (CPU devices, GPUs) and ProcessGroupCommunicator.

:func:`check_collectives` runs every collective with every op, several dtypes and shapes, roots
0 and n-1, against expected values computed here from first principles (``torch.stack`` and
``torch.cat`` over every participant's input, built independently on each rank).  Inputs are small
integers, so every sum, product and power-of-two average is exact in every dtype and the results
must be *identical* across implementations.  The body returns a list of problems so that one run
reports all of them.
"""

from __future__ import annotations

import pytest
import torch
import torch.distributed

import gpucomm.dist as gd
from gpucomm import Communicator, LocalCommunicator, ProcessGroupCommunicator
from gpucomm.testing import check_ranks, requires_gpus, spawn

DTYPES = (torch.float32, torch.float64, torch.bfloat16, torch.int32, torch.int64)
OPS = ("sum", "avg", "max", "min", "prod")
CHUNKS = ((2, 3), (257,))  # one participant's chunk: a small 2-d one and one that gloo splits up


def _value(p: int, shape: tuple[int, ...], dtype: torch.dtype, salt: int = 0) -> torch.Tensor:
    """Participant p's input: values in {1, 2, 3} that differ by participant and position."""
    numel = 1
    for s in shape:
        numel *= s
    base = torch.arange(numel, dtype=torch.int64).reshape(shape)
    return ((base * (p + 2) + 3 * p + salt) % 3 + 1).to(dtype)


def _reduce(stack: torch.Tensor, op: str, n: int, dtype: torch.dtype) -> torch.Tensor:
    wide = stack.to(torch.float64)
    out = {"sum": lambda: wide.sum(0), "avg": lambda: wide.sum(0) / n, "max": lambda: wide.amax(0),
           "min": lambda: wide.amin(0), "prod": lambda: wide.prod(0)}[op]()
    return out.to(dtype)


def _full(chunk: tuple[int, ...], n: int) -> tuple[int, ...]:
    return (chunk[0] * n,) + chunk[1:]


class _Checker:
    """Builds inputs for the participants this process holds and compares results exactly."""

    def __init__(self, comm: Communicator):
        self.comm, self.n, self.mine = comm, comm.n, comm.participants
        self.problems: list[str] = []

    def inputs(self, shape, dtype, salt=0) -> list[torch.Tensor]:
        return [_value(p, shape, dtype, salt).to(d) for p, d in zip(self.mine, self.comm.devices, strict=True)]

    def everyone(self, shape, dtype, salt=0) -> list[torch.Tensor]:
        return [_value(p, shape, dtype, salt) for p in range(self.n)]

    def empty(self, shape, dtype) -> list[torch.Tensor]:
        return [torch.full(shape, -7, dtype=dtype, device=d) for d in self.comm.devices]

    def expect(self, what: str, got: list, want) -> None:
        for p, g in zip(self.mine, got, strict=True):
            w = want(p)
            if g is None or w is None:
                continue
            g = g.cpu()
            if g.dtype != w.dtype or g.shape != w.shape or not torch.equal(g, w):
                self.problems.append(f"{what} participant {p}: expected {w.flatten()[:6].tolist()} "
                                     f"({w.dtype}{list(w.shape)}), got {g.flatten()[:6].tolist()} "
                                     f"({g.dtype}{list(g.shape)})")

    def expect_raises(self, what: str, exc: type, fn) -> None:
        try:
            fn()
        except exc:
            return
        self.problems.append(f"{what}: expected {exc.__name__}, nothing was raised")


def _reducing(c: _Checker, dtype: torch.dtype, chunk: tuple[int, ...]) -> None:
    n, full = c.n, _full(chunk, c.n)
    for op in OPS:
        tag = f"[{dtype} {op} {list(chunk)}]"
        if op == "avg" and not dtype.is_floating_point:
            c.expect_raises(f"all_reduce{tag}", ValueError, lambda op=op: c.comm.all_reduce(c.inputs(full, dtype), op))
            continue
        everyone = torch.stack(c.everyone(full, dtype))
        red = _reduce(everyone, op, n, dtype)
        ts = c.inputs(full, dtype)
        c.comm.all_reduce(ts, op)
        c.expect(f"all_reduce{tag}", ts, lambda p, red=red: red)
        for root in sorted({0, n - 1}):
            ts = c.inputs(full, dtype)
            c.comm.reduce(ts, root, op)
            c.expect(f"reduce{tag} root={root}", ts, lambda p, r=root, red=red, e=everyone: red if p == r else e[p])
        outs = c.empty(chunk, dtype)
        c.comm.reduce_scatter(outs, c.inputs(full, dtype), op)
        c.expect(f"reduce_scatter{tag}", outs, lambda p, red=red: red.chunk(n)[p])


def _moving(c: _Checker, dtype: torch.dtype, chunk: tuple[int, ...]) -> None:
    n, full, tag = c.n, _full(chunk, c.n), f"[{dtype} {list(chunk)}]"
    fulls, chunks = c.everyone(full, dtype, salt=1), c.everyone(chunk, dtype, salt=2)
    for root in sorted({0, n - 1}):
        ts = c.inputs(full, dtype, salt=1)
        c.comm.broadcast(ts, root)
        c.expect(f"broadcast{tag} root={root}", ts, lambda p, r=root: fulls[r])
        outs = c.empty(chunk, dtype)
        ins = [t if p == root else None for p, t in zip(c.mine, c.inputs(full, dtype, salt=1), strict=True)]
        c.comm.scatter(outs, ins, root)
        c.expect(f"scatter{tag} root={root}", outs, lambda p, r=root: fulls[r].chunk(n)[p])
        outs = [t if p == root else None for p, t in zip(c.mine, c.empty(full, dtype), strict=True)]
        c.comm.gather(outs, c.inputs(chunk, dtype, salt=2), root)
        c.expect(f"gather{tag} root={root}", outs, lambda p, r=root: torch.cat(chunks) if p == r else None)
    outs = c.empty(full, dtype)
    c.comm.all_gather(outs, c.inputs(chunk, dtype, salt=2))
    c.expect(f"all_gather{tag}", outs, lambda p: torch.cat(chunks))
    outs = c.empty(full, dtype)
    c.comm.all_to_all(outs, c.inputs(full, dtype, salt=1))
    c.expect(f"all_to_all{tag}", outs, lambda j: torch.cat([fulls[i].chunk(n)[j] for i in range(n)]))
    outs = c.empty(full, dtype)
    c.comm.send_recv(outs, c.inputs(full, dtype, salt=1))
    c.expect(f"send_recv{tag}", outs, lambda p: fulls[(p - 1) % n])


def check_collectives(comm: Communicator) -> list[str]:
    """THE test body: every collective, op, dtype and root on ``comm``; returns the problems found."""
    c = _Checker(comm)
    held = comm.devices
    if len(held) * comm.world_size != comm.n or comm.participants != list(range(comm.rank * len(held),
                                                                                 comm.rank * len(held) + len(held))):
        c.problems.append(f"inconsistent participants: n={comm.n} world={comm.world_size} held={held}")
    for dtype in DTYPES:
        for chunk in CHUNKS:
            _reducing(c, dtype, chunk)
            _moving(c, dtype, chunk)
    comm.barrier()
    comm.synchronize()
    return c.problems


def _on_process_group() -> list[str]:
    comm = ProcessGroupCommunicator()
    problems = check_collectives(comm)
    if (comm.rank, comm.world_size, comm.n) != (gd.get_rank(), gd.get_world_size(), gd.get_world_size()):
        problems.append(f"rank/world_size/n disagree with torch.distributed: {comm!r}")
    if gd.get_world_size() == 4:  # subgroups: participant (group rank) 1 of [1, 3] is global rank 3
        groups = [torch.distributed.new_group([0, 2]), torch.distributed.new_group([1, 3])]
        sub = ProcessGroupCommunicator(groups[gd.get_rank() % 2])
        if (sub.n, sub.rank) != (2, gd.get_rank() // 2):
            problems.append(f"subgroup communicator: n={sub.n} rank={sub.rank}")
        problems += [f"subgroup {gd.get_rank() % 2}: {p}" for p in check_collectives(sub)]
    return problems


def _needs_comm() -> None:
    comm = pytest.importorskip("gpucomm.comm")
    if not hasattr(comm, "all_to_all"):
        pytest.skip("gpucomm.comm has not landed yet (no all_to_all)")


# ----- LocalCommunicator ------------------------------------------------------------------------------
@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_local_communicator_on_cpu_devices(n):
    _needs_comm()
    comm = LocalCommunicator(["cpu"] * n)
    assert (comm.n, comm.rank, comm.world_size, comm.participants) == (n, 0, 1, list(range(n)))
    check_ranks([check_collectives(comm)])


@requires_gpus(1)
def test_local_communicator_on_repeated_cuda0():
    _needs_comm()
    check_ranks([check_collectives(LocalCommunicator(["cuda:0"] * 3))])


@requires_gpus(2)
def test_local_communicator_on_distinct_gpus():
    _needs_comm()
    count = torch.cuda.device_count()
    check_ranks([check_collectives(LocalCommunicator(list(range(count))))])


# ----- ProcessGroupCommunicator -----------------------------------------------------------------------
def test_process_group_communicator_world_of_one_in_process():
    with gd.init("gloo"):
        check_ranks([_on_process_group()])


@pytest.mark.parametrize("world_size", [2, 4])
def test_process_group_communicator_gloo(world_size):
    check_ranks(spawn(_on_process_group, world_size=world_size))


@requires_gpus(1)
def test_process_group_communicator_nccl_world_of_one_in_process():
    with gd.init("nccl") as pg:
        assert pg.device == torch.device("cuda", 0)
        check_ranks([_on_process_group()])


@requires_gpus(1)
def test_process_group_communicator_nccl_launched_world_of_one():
    check_ranks(gd.launch(_on_process_group, 1, backend="nccl", timeout=300))


@requires_gpus(2)
def test_process_group_communicator_nccl_world_of_two():
    check_ranks(gd.launch(_on_process_group, 2, backend="nccl", timeout=300))


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
    with pytest.raises(ValueError, match="op: expected a floating-point tensor"):
        comm.all_reduce([torch.ones(2, dtype=torch.int32)] * 2, "avg")
    with pytest.raises(ValueError, match="devices: expected at least one device"):
        LocalCommunicator([])


def test_process_group_communicator_needs_a_group():
    with pytest.raises(RuntimeError, match=r"gpucomm.dist.init\(\)"):
        ProcessGroupCommunicator()


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
