"""gpucomm.dist.prepare: a prepared call gives what the plain call gives, follows the tensors' contents,
and refuses bad arguments when it is prepared rather than when it runs.

The equality checks run in gloo launches of world 2 and world 4 (one body checks every op, so each
world costs one launch); the argument checks need only a world of one, in this process.
"""

from __future__ import annotations

import pytest
import torch

import gpucomm.dist as gd
from gpucomm.testing import check_ranks, requires_gpus, spawn


def _data(rank: int, numel: int, salt: int) -> torch.Tensor:
    t = (torch.arange(numel, dtype=torch.float32) * (rank + 3) + rank + salt) % 7 + 1
    return t.to(gd.device())  # cuda:LOCAL_RANK under NCCL


def _zeros(numel: int) -> torch.Tensor:
    return torch.zeros(numel, device=gd.device())


def _cases(rank: int, n: int):
    """(label, op, make_args) where make_args(salt) -> (args, kwargs, tensors to compare afterwards).

    Every case is run on two fresh argument sets: one through the plain function, one prepared.
    """
    rows = 3

    def all_reduce(op, async_op=False):
        def make(salt):
            t = _data(rank, 6, salt)
            return (t, op), {"async_op": async_op}, [t]
        return make

    def reduce(dst, op):
        def make(salt):
            t = _data(rank, 6, salt)
            return (t, dst, op), {}, [t]
        return make

    def broadcast(src):
        def make(salt):
            t = _data(rank, 5, salt)
            return (t, src), {}, [t]
        return make

    def all_gather(salt):
        out, inp = _zeros(n * rows), _data(rank, rows, salt)
        return (out, inp), {}, [out]

    def reduce_scatter(op):
        def make(salt):
            out, inp = _zeros(rows), _data(rank, n * rows, salt)
            return (out, inp, op), {}, [out]
        return make

    def scatter(src):
        def make(salt):
            out = _zeros(rows)
            xs = [_data(src, rows, salt + i) for i in range(n)] if rank == src else None
            return (out, xs, src), {}, [out]
        return make

    def gather(dst):
        def make(salt):
            xs = [_zeros(rows) for _ in range(n)] if rank == dst else None
            return (_data(rank, rows, salt), xs, dst), {}, xs or []
        return make

    def all_to_all(salt):
        out, inp = _zeros(n * rows), _data(rank, n * rows, salt)
        return (out, inp), {}, [out]

    def all_to_all_uneven(salt):
        ins = [(rank + j) % 3 + 1 for j in range(n)]  # rank r sends (r + j) % 3 + 1 rows to rank j
        outs = [(j + rank) % 3 + 1 for j in range(n)]  # and receives (j + r) % 3 + 1 rows from rank j
        out, inp = _zeros(sum(outs)), _data(rank, sum(ins), salt)
        return (out, inp, outs, ins), {}, [out]

    def send_recv(async_op):
        def make(salt):
            out, inp = _zeros(rows), _data(rank, rows, salt)
            return (out, inp), {"async_op": async_op}, [out]
        return make

    last = n - 1
    yield from [
        ("all_reduce sum", "all_reduce", all_reduce("sum")),
        ("all_reduce max", "all_reduce", all_reduce("max")),
        ("all_reduce avg", "all_reduce", all_reduce("avg")),
        ("all_reduce avg async", "all_reduce", all_reduce("avg", async_op=True)),
        ("reduce sum to last", "reduce", reduce(last, "sum")),
        ("reduce avg to 0", "reduce", reduce(0, "avg")),
        ("broadcast from last", "broadcast", broadcast(last)),
        ("all_gather_into_tensor", "all_gather_into_tensor", all_gather),
        ("all_gather (alias)", "all_gather", all_gather),
        ("reduce_scatter_tensor sum", "reduce_scatter_tensor", reduce_scatter("sum")),
        ("reduce_scatter avg (alias)", "reduce_scatter", reduce_scatter("avg")),
        ("scatter from last", "scatter", scatter(last)),
        ("gather to 0", "gather", gather(0)),
        ("all_to_all_single", "all_to_all_single", all_to_all),
        ("all_to_all uneven (alias)", "all_to_all", all_to_all_uneven),
        ("send_recv", "send_recv", send_recv(False)),
        ("send_recv async", "send_recv", send_recv(True)),
    ]


def _finish(result, async_op: bool):
    if async_op:
        assert result is not None, "async_op=True returned no work"
        result.wait()
    elif result is not None:
        raise AssertionError(f"a synchronous call returned {result!r}, not None")


def _prepared_equals_plain() -> list[str]:
    rank, n = gd.get_rank(), gd.get_world_size()
    problems: list[str] = []
    for label, op, make in _cases(rank, n):
        fn = getattr(gd, gd.prepared._ALIASES.get(op, op))
        for salt in (0, 10):  # two rounds: the second after mutating the prepared tensors in place
            args, kwargs, plain_out = make(salt)
            _finish(fn(*args, **kwargs), kwargs.get("async_op", False))
            if salt == 0:
                p_args, p_kwargs, p_out = make(0)
                p = gd.prepare(op, *p_args, **p_kwargs)
            else:  # the same tensors as prepared, new contents: the prepared call must follow them
                fresh_args, _, _ = make(salt)  # outputs fresh (zeros), inputs with new data
                for old, new in zip(p_args, fresh_args, strict=True):
                    if isinstance(old, torch.Tensor):
                        old.copy_(new)
                    elif isinstance(old, list) and old and isinstance(old[0], torch.Tensor):
                        for o, x in zip(old, new, strict=True):
                            o.copy_(x)
            _finish(p(), p_kwargs.get("async_op", False))
            for i, (want, got) in enumerate(zip(plain_out, p_out, strict=True)):
                if not torch.equal(want, got):
                    problems.append(f"{label} (round {salt}): output {i} prepared {got.tolist()} "
                                    f"!= plain {want.tolist()}")
    p = gd.prepare("barrier")
    if p() is not None:
        problems.append("prepared barrier returned something")
    return problems


def _mutation_changes_results() -> list[str]:
    """The check above could pass if both rounds gave the same numbers; show that they differ."""
    t = torch.full((4,), float(gd.get_rank() + 1), device=gd.device())
    p = gd.prepare("all_reduce", t)
    p()
    first = t.clone()
    t.fill_(10.0)
    p()
    n = gd.get_world_size()
    want_first, want_second = float(n * (n + 1) // 2), 10.0 * n
    problems = []
    if not torch.equal(first.cpu(), torch.full((4,), want_first)):
        problems.append(f"first prepared all_reduce gave {first.tolist()}, want {want_first}")
    if not torch.equal(t.cpu(), torch.full((4,), want_second)):
        problems.append(f"after writing 10s, the prepared all_reduce gave {t.tolist()}, want {want_second}")
    return problems


def _bad_arguments_fail_at_prepare() -> list[str]:
    """Shapes that only the world size makes wrong: caught by prepare, on every rank, before any call."""
    n = gd.get_world_size()
    cases = [
        ("all_gather", (torch.zeros(n * 3 + 1), torch.zeros(3)), ValueError, "output_tensor"),
        ("reduce_scatter", (torch.zeros(3), torch.zeros(n * 3 - 1)), ValueError, "input"),
        ("all_to_all", (torch.zeros(n), torch.zeros(n), [1] * n, [1] * (n + 1)), ValueError,
         "input_split_sizes"),
        ("scatter", (torch.zeros(3), [torch.zeros(3)] * (n + 1) if gd.get_rank() == 0 else None, 0),
         ValueError, "scatter_list" if gd.get_rank() == 0 else None),
        ("broadcast", (torch.zeros(3), n), ValueError, "src"),
    ]
    problems = []
    for op, args, exc, arg in cases:
        try:
            gd.prepare(op, *args)
        except exc as e:
            if arg is None or not str(e).startswith(f"{arg}:"):
                problems.append(f"{op}: message does not start with {arg!r}: {e}")
        else:
            if arg is not None:
                problems.append(f"{op}{[getattr(a, 'shape', a) for a in args]}: prepare accepted it")
    return problems


def _subgroup() -> list[str]:
    """A group of ranks 0 and 1: its members prepare on it; the others and foreign roots are refused."""
    import torch.distributed as td

    if gd.get_world_size() < 3:
        return []
    group = td.new_group([0, 1])  # collective over every rank
    rank, problems = gd.get_rank(), []
    t = torch.full((3,), float(rank + 1))
    if rank in (0, 1):
        gd.prepare("all_reduce", t, group=group)()
        if not torch.equal(t, torch.full((3,), 3.0)):
            problems.append(f"subgroup all_reduce gave {t.tolist()}, want 3s")
        try:
            gd.prepare("broadcast", t, 2, group=group)
            problems.append("prepare accepted src=2, which is not in the group")
        except ValueError as e:
            problems += [] if str(e).startswith("src: expected a rank of the group") else [f"message: {e}"]
    else:
        try:
            gd.prepare("all_reduce", t, group=group)
            problems.append("prepare accepted a group this rank is not in")
        except ValueError as e:
            problems += [] if str(e).startswith("group: expected a group this rank belongs to") else [f"{e}"]
    td.barrier()
    return problems


def _body() -> list[str]:
    return (_prepared_equals_plain() + _mutation_changes_results() + _bad_arguments_fail_at_prepare()
            + _subgroup())


@pytest.mark.parametrize("world_size", [2, 4])
def test_prepared_equals_plain_for_every_op(world_size):
    check_ranks(spawn(_body, world_size=world_size))


@requires_gpus(1)
def test_prepared_equals_plain_on_nccl_world_of_one():
    check_ranks(spawn(_nccl_body, world_size=1, backend="nccl"))


@requires_gpus(2)
def test_prepared_equals_plain_on_nccl_world_of_two():
    check_ranks(spawn(_nccl_body, world_size=2, backend="nccl"))


def _nccl_body() -> list[str]:
    problems = _prepared_equals_plain() + _mutation_changes_results()
    try:
        gd.prepare("all_reduce", torch.ones(2))  # a CPU tensor on an NCCL group
    except ValueError as e:
        problems += [] if str(e).startswith("tensor: expected a CUDA tensor") else [f"message: {e}"]
    else:
        problems.append("prepare accepted a CPU tensor on NCCL")
    return problems


# ----- argument checks, in this process (a world of one) -------------------------------------------
@pytest.fixture
def world_of_one():
    with gd.init("gloo"):
        yield


def test_prepare_without_a_group_says_to_init():
    with pytest.raises(RuntimeError, match=r"gpucomm.dist.init\(\)"):
        gd.prepare("all_reduce", torch.ones(2))


@pytest.mark.parametrize("op, args, kwargs, exc, starts", [
    (None, (torch.ones(2),), {}, TypeError, "op:"),
    ("all_reduce_avg", (torch.ones(2),), {}, ValueError, "op:"),
    ("all_reduce", ([1.0, 2.0],), {}, TypeError, "tensor:"),
    ("all_reduce", (torch.ones(2), "mean"), {}, ValueError, "op:"),
    ("all_reduce", (torch.ones(2, dtype=torch.int64),), {"op": "avg"}, ValueError, "op:"),
    ("all_reduce", (torch.ones(2),), {"async_op": 1}, TypeError, "async_op:"),
    ("all_reduce", (torch.ones(2).to_sparse(),), {}, ValueError, "tensor:"),
    ("all_reduce", (torch.ones(2),), {"bogus": 1}, TypeError, "gpucomm.dist.prepare('all_reduce')"),
    ("broadcast", (torch.ones(2), 1), {}, ValueError, "src:"),
    ("broadcast", (torch.ones(2), True), {}, TypeError, "src:"),
    ("reduce", (torch.ones(2), -1), {}, ValueError, "dst:"),
    ("all_gather", (torch.ones(3, dtype=torch.float64), torch.ones(3)), {}, ValueError, "input_tensor:"),
    ("all_gather", (torch.ones(4), torch.ones(3)), {}, ValueError, "output_tensor:"),
    ("reduce_scatter", (torch.ones(2), torch.ones(3)), {}, ValueError, "input:"),
    ("all_to_all", (torch.ones(3), torch.ones(4)), {}, ValueError, "output:"),
    ("all_to_all", (torch.ones(3), torch.ones(3), [3], [2]), {}, ValueError, "input_split_sizes:"),
    ("all_to_all", (torch.ones(3), torch.ones(3), "3", None), {}, TypeError, "output_split_sizes:"),
    ("scatter", (torch.ones(2), [torch.ones(2), torch.ones(2)], 0), {}, ValueError, "scatter_list:"),
    ("scatter", (torch.ones(2), [torch.ones(3)], 0), {}, ValueError, "scatter_list[0]:"),
    ("gather", (torch.ones(2), torch.ones(2), 0), {}, TypeError, "gather_list:"),
    ("send_recv", (torch.ones(2), torch.ones(3)), {}, ValueError, "output:"),
    ("send", (torch.ones(2), 0), {"tag": "x"}, TypeError, "tag:"),
])
def test_bad_arguments_raise_at_prepare(world_of_one, op, args, kwargs, exc, starts):
    with pytest.raises(exc) as info:
        gd.prepare(op, *args, **kwargs)
    assert str(info.value).startswith(starts), str(info.value)
    assert "\n" not in str(info.value)


def test_a_group_this_rank_is_not_in_is_refused(world_of_one):
    with pytest.raises(TypeError, match="^group:"):
        gd.prepare("all_reduce", torch.ones(2), group="world")


def test_a_prepared_call_returns_what_the_plain_call_returns(world_of_one):
    t = torch.ones(3)
    assert gd.prepare("all_reduce", t)() is None
    work = gd.prepare("all_reduce", t, op="avg", async_op=True)()
    assert work.wait() is not False and torch.equal(t, torch.ones(3))
    work = gd.prepare("broadcast", t, 0, async_op=True)()
    assert hasattr(work, "wait")
    work.wait()


def test_prepare_is_listed_and_every_name_resolves():
    assert "prepare" in gd.__all__
    for name in gd.PREPARABLE:
        assert callable(getattr(gd, gd.prepared._ALIASES.get(name, name)))


def test_a_prepared_call_is_the_raw_partial_with_positional_arguments(world_of_one):
    """Defaults left out and no keywords: the object a user builds for the raw call, so it costs the same."""
    import functools

    import torch.distributed as td

    from gpucomm.prepared import Prepared

    t, whole = torch.ones(4), torch.zeros(4)
    cases = [(gd.prepare("all_reduce", t), td.all_reduce, (t, td.ReduceOp.SUM)),
             (gd.prepare("reduce", t, 0, "max"), td.reduce, (t, 0, td.ReduceOp.MAX)),
             (gd.prepare("broadcast", t, 0), td.broadcast, (t, 0)),
             (gd.prepare("all_gather", whole, t), gd.ops._all_gather_tensor, (whole, t)),
             (gd.prepare("all_reduce", t, async_op=True), td.all_reduce, (t, td.ReduceOp.SUM, None, True))]
    for p, fn, args in cases:
        assert isinstance(p, Prepared) and isinstance(p, functools.partial) and p.func is fn, p
        assert p.args == args and p.keywords == {}, (p.args, p.keywords)
    copy = gd.prepare("send_recv", whole, t)
    assert copy() is None and torch.equal(whole, t)  # a world of one copies, returning None as plain does


def test_plain_calls_pass_torch_positional_arguments(world_of_one, monkeypatch):
    import torch.distributed as td

    seen = []
    monkeypatch.setattr(td, "all_reduce", lambda *a, **k: seen.append((len(a), k)))
    monkeypatch.setattr(td, "broadcast", lambda *a, **k: seen.append((len(a), k)))
    gd.all_reduce(torch.ones(2), "sum")
    gd.broadcast(torch.ones(2), 0)
    assert seen == [(4, {}), (4, {})]
