"""gpucomm.dist's collectives against torch.distributed's own, in one gloo launch (world size 2).

One body runs a parametrized table: for each collective, the same inputs through
``torch.distributed.X`` (with torch's ``ReduceOp``) and ``gpucomm.dist.X`` (with our str ops) must give
identical results.  The same body checks what we add on top — avg on gloo (sync and async), reduce
leaving the other ranks' tensors alone, send_recv, the debug check's silence on agreeing ranks —
and that nothing the workers listen on is reachable beyond loopback.  The per-call caches (ops,
group facts, the debug flag) are checked in-process, in a world of one, at the end.
"""

from __future__ import annotations

import ipaddress
import os

import psutil
import pytest
import torch
import torch.distributed as td

import gpucomm.dist as gd
from gpucomm import ProcessGroupCommunicator
from gpucomm.dist import debug
from gpucomm.dist.debug import ENV_VAR, debug_check_enabled
from gpucomm.dist.process_group import _GROUP_INFO
from gpucomm.testing import check_ranks, spawn

_td_all_gather = getattr(td, "all_gather_single", None) or td.all_gather_into_tensor  # torch >= 2.12 names
_td_reduce_scatter = getattr(td, "reduce_scatter_single", None) or td.reduce_scatter_tensor
_OPS = {"sum": td.ReduceOp.SUM, "max": td.ReduceOp.MAX, "min": td.ReduceOp.MIN, "prod": td.ReduceOp.PRODUCT}


def _input(rank: int, numel: int = 12, dtype=torch.float32) -> torch.Tensor:
    return ((torch.arange(numel) * (rank + 3) + rank) % 5 + 1).to(dtype)


def _pairs(rank: int, n: int):
    """(name, torch's call, our call) over the same fresh inputs; each call returns what to compare."""
    def run_both(make, ours, theirs):
        a, b = make(), make()
        theirs(a)
        ours(b)
        return a, b

    for name, top in _OPS.items():
        yield f"all_reduce {name}", run_both(
            lambda: [_input(rank)], lambda b, s=name: gd.all_reduce(b[0], s), lambda a, t=top: td.all_reduce(a[0], t))
        yield f"all_reduce {name} (torch op object)", run_both(
            lambda: [_input(rank)], lambda b, t=top: gd.all_reduce(b[0], t), lambda a, t=top: td.all_reduce(a[0], t))
        yield f"reduce_scatter_tensor {name}", run_both(
            lambda: [torch.empty(6), _input(rank)], lambda b, s=name: gd.reduce_scatter_tensor(b[0], b[1], s),
            lambda a, t=top: _td_reduce_scatter(a[0], a[1], t))
    yield "reduce to 1 (dst's tensor)", run_both(
        lambda: [_input(rank)], lambda b: gd.reduce(b[0], 1, "sum"),
        lambda a: (td.reduce(a[0], 1), rank != 1 and a[0].copy_(_input(rank))))
    yield "broadcast from 1", run_both(lambda: [_input(rank)], lambda b: gd.broadcast(b[0], 1),
                                       lambda a: td.broadcast(a[0], 1))
    yield "all_gather_into_tensor", run_both(
        lambda: [torch.empty(12 * n), _input(rank)], lambda b: gd.all_gather_into_tensor(b[0], b[1]),
        lambda a: _td_all_gather(a[0], a[1]))
    yield "all_to_all_single", run_both(
        lambda: [torch.empty(12), _input(rank)], lambda b: gd.all_to_all_single(b[0], b[1]),
        lambda a: td.all_to_all_single(a[0], a[1]))
    yield "scatter from 0", run_both(
        lambda: [torch.empty(6)] + list(_input(0).chunk(n)),
        lambda b: gd.scatter(b[0], b[1:] if rank == 0 else None, 0),
        lambda a: td.scatter(a[0], a[1:] if rank == 0 else None, 0))
    yield "gather to 1", run_both(
        lambda: [_input(rank)] + [torch.zeros(12) for _ in range(n)],
        lambda b: gd.gather(b[0], b[1:] if rank == 1 else None, 1),
        lambda a: td.gather(a[0], a[1:] if rank == 1 else None, 1))


def _listening_addresses() -> list[str]:
    proc = psutil.Process()
    conns = proc.net_connections(kind="inet") if hasattr(proc, "net_connections") else proc.connections("inet")
    return [c.laddr.ip for c in conns if c.status == psutil.CONN_LISTEN]


def _extras(rank: int, n: int) -> list[str]:
    problems = []
    t = _input(rank)
    gd.all_reduce(t, "avg")
    want = (_input(0) + _input(1)) / 2
    if not torch.equal(t, want):
        problems.append(f"avg: {t.tolist()} != {want.tolist()}")
    t = _input(rank)
    work = gd.all_reduce(t, "avg", async_op=True)
    work.wait()
    if not torch.equal(t, want):
        problems.append(f"async avg: {t.tolist()} != {want.tolist()}")
    t = _input(rank)
    gd.reduce(t, 0, "prod")
    want = _input(0) * _input(1) if rank == 0 else _input(rank)
    if not torch.equal(t, want):
        problems.append(f"reduce prod on rank {rank}: {t.tolist()} != {want.tolist()}")
    out = torch.empty(12)
    gd.send_recv(out, _input(rank))
    if not torch.equal(out, _input((rank - 1) % n)):
        problems.append("send_recv: not the previous rank's input")
    comm = ProcessGroupCommunicator()
    buf = _input(rank) if rank == 0 else torch.zeros(12)
    if rank == 0:
        comm.send(buf, 1)
    else:
        comm.recv(buf, 0)
    if not torch.equal(buf, _input(0)):
        problems.append("Communicator send/recv: rank 1 did not receive rank 0's tensor")
    gd.set_debug_check(True)
    try:
        t = _input(rank)
        gd.all_reduce(t)  # agreeing ranks: the check passes and the result is unchanged
        if not torch.equal(t, _input(0) + _input(1)):
            problems.append("all_reduce under the debug check gave a different result")
    finally:
        gd.set_debug_check(None)
    gd.barrier()
    return problems


def _body() -> dict:
    rank, n = gd.get_rank(), gd.get_world_size()
    problems = []
    for name, (theirs, ours) in _pairs(rank, n):
        for i, (a, b) in enumerate(zip(theirs, ours, strict=True)):
            if not torch.equal(a, b):
                problems.append(f"{name} tensor {i}: torch {a.tolist()} != gpucomm {b.tolist()}")
    problems += _extras(rank, n)
    env = {k: os.environ.get(k) for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
                                         "GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME", "NCCL_NVLS_ENABLE")}
    return {"problems": problems, "env": env, "listening": _listening_addresses(), "backend": gd.backend()}


def test_gpucomm_dist_matches_torch_distributed_and_listens_only_on_loopback():
    results = spawn(_body, world_size=2)
    check_ranks([r["problems"] for r in results])
    for rank, r in enumerate(results):
        assert r["backend"] == "gloo"
        assert r["env"] == {"RANK": str(rank), "WORLD_SIZE": "2", "LOCAL_RANK": str(rank),
                            "LOCAL_WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "GLOO_SOCKET_IFNAME": "lo",
                            "NCCL_SOCKET_IFNAME": "lo", "NCCL_NVLS_ENABLE": os.environ.get("NCCL_NVLS_ENABLE")}
        assert r["listening"], "expected gloo's listening socket to be visible"
        outside = [a for a in r["listening"] if not ipaddress.ip_address(a).is_loopback]
        assert not outside, f"rank {rank} listens beyond loopback on {outside}"


# ----- the per-call caches (ops, group facts, the debug flag) keep the uncached behaviour -----------
# All in-process, a world of one on gloo: the caches are per process, so ranks add nothing here.


def test_the_env_var_is_read_on_every_call_through_the_cache(monkeypatch):
    seen = []
    for value in ("1", "0", "yes", " On ", "off", "1"):
        monkeypatch.setenv(ENV_VAR, value)
        seen.append(debug_check_enabled())
    monkeypatch.delenv(ENV_VAR)
    seen.append(debug_check_enabled())
    assert seen == [True, False, True, True, False, True, False]


def test_a_replaced_os_environ_is_still_read(monkeypatch):
    monkeypatch.setattr(os, "environ", {ENV_VAR: "true"})
    assert debug_check_enabled()
    os.environ[ENV_VAR] = "0"
    assert not debug_check_enabled()


def test_collectives_see_a_replaced_os_environ(monkeypatch):
    calls = []
    monkeypatch.setattr(debug, "verify", lambda name, group, tensors: calls.append(name))
    with gd.init("gloo"):
        monkeypatch.setattr(os, "environ", {ENV_VAR: "1"})  # not the dict the fast pre-test reads
        gd.all_reduce(torch.ones(2))
    assert calls == ["all_reduce"]


def test_collectives_see_the_env_var_set_after_import(monkeypatch):
    calls = []
    monkeypatch.setattr(debug, "verify", lambda name, group, tensors: calls.append((name, list(tensors))))
    with gd.init("gloo"):
        t = torch.ones(2)
        monkeypatch.setenv(ENV_VAR, "0")
        gd.all_reduce(t)
        monkeypatch.setenv(ENV_VAR, "1")
        gd.all_reduce(t)
        gd.all_gather_into_tensor(torch.empty(2), t)
        gd.set_debug_check(False)
        try:
            gd.broadcast(t, 0)
        finally:
            gd.set_debug_check(None)
        gd.all_to_all_single(torch.empty(2), t, [2], [2])
    assert calls == [("all_reduce", ["tensor"]), ("all_gather_into_tensor", ["output_tensor", "input_tensor"]),
                     ("all_to_all_single", [])]


@pytest.mark.parametrize("op", ["sum", "SUM", "Sum", td.ReduceOp.SUM, "avg", "max", td.ReduceOp.MAX, "product"])
def test_every_spelling_of_an_op_gives_the_same_result_twice(op):
    with gd.init("gloo"):
        for _ in range(2):  # the second call takes the cached mapping
            t = torch.tensor([1.0, -2.0])
            gd.all_reduce(t, op)
            assert t.tolist() == [1.0, -2.0]


@pytest.mark.parametrize(("op", "error", "match"), [
    ("mean", ValueError, "unknown reduction op 'mean'"),
    (["sum"], TypeError, "expected a str such as 'sum', but got list"),
    (3, TypeError, "expected a str such as 'sum', but got int 3"),
])
def test_a_bad_op_fails_the_same_way_every_time(op, error, match):
    with gd.init("gloo"):
        for _ in range(2):  # never cached: the second call raises too
            with pytest.raises(error, match=match):
                gd.all_reduce(torch.ones(2), op)


def test_avg_on_integers_still_fails_after_a_float_avg():
    with gd.init("gloo"):
        gd.all_reduce(torch.ones(2), "avg")
        with pytest.raises(ValueError, match="a floating-point tensor for op='avg'"):
            gd.all_reduce(torch.ones(2, dtype=torch.int64), "avg")


def test_group_facts_are_forgotten_at_shutdown():
    with gd.init("gloo"):
        t = torch.full((2,), 3.0)
        work = gd.all_reduce(t, "avg", async_op=True)
        work.wait()
        assert t.tolist() == [3.0, 3.0]
        assert len(_GROUP_INFO) == 1
        gd.reduce(t, 0, "avg")
        assert t.tolist() == [3.0, 3.0]
    assert not _GROUP_INFO
    with pytest.raises(ValueError, match="not been initialized"):  # no stale answer from the cache
        gd.all_reduce(torch.ones(2), "avg")


def test_the_type_checks_still_name_the_argument():
    with gd.init("gloo"):
        with pytest.raises(TypeError, match=r"^tensor: expected a torch.Tensor, but got list"):
            gd.all_reduce([1.0])
        with pytest.raises(TypeError, match=r"^input_tensor: expected a torch.Tensor, but got int"):
            gd.all_gather_into_tensor(torch.empty(2), 5)
        with pytest.raises(TypeError, match=r"^output: expected a torch.Tensor, but got str"):
            gd.reduce_scatter_tensor("x", torch.ones(2))


def test_the_communicators_fast_checks_fall_back_to_the_full_messages():
    with gd.init("gloo"):
        comm = ProcessGroupCommunicator()
        a, b = torch.arange(4.0), torch.zeros(4)
        comm.scatter([b], [a], 0)
        assert b.tolist() == a.tolist()
        comm.gather([b.mul_(0)], [a], 0)
        assert b.tolist() == a.tolist()
        with pytest.raises(ValueError, match=r"^root: expected a participant index in \[0, 1\), but got 1"):
            comm.broadcast([a], 1)
        with pytest.raises(TypeError, match=r"^root: expected an int participant index, but got bool"):
            comm.reduce([a], True)
        with pytest.raises(ValueError, match=r"^outputs\[0\]: expected shape \[4\]"):
            comm.scatter([torch.zeros(3)], [a], 0)
        with pytest.raises(ValueError, match=r"^outputs\[0\]: expected shape \[4\]"):
            comm.all_to_all([torch.zeros(2)], [a])
        with pytest.raises(ValueError, match=r"^inputs\[0\]: expected a tensor whose dim 0 splits"):
            comm.all_to_all([torch.zeros(())], [torch.zeros(())])
        with pytest.raises(ValueError, match=r"^outputs\[0\]: expected shape \[4\]"):
            comm.send_recv([torch.zeros(2, 2)], [a])


def test_the_default_group_reader_agrees_with_torchs_group_world():
    from gpucomm.dist import ops

    readers = (ops._WORLD, ops._DefaultGroupReader())
    assert all(r._default_pg is td.group.WORLD for r in readers)  # None before init
    with gd.init("gloo"):
        assert td.group.WORLD is not None and all(r._default_pg is td.group.WORLD for r in readers)
    assert all(r._default_pg is td.group.WORLD for r in readers)
