"""The case table shared by the CPU and GPU runs of tests/comm/test_table.py.

Each case builds its inputs on a device list, calls one function of a comm module (``gpucomm.comm``
or ``torch.cuda.comm``), and states the expected result with plain torch ops (``cat``, ``chunk``,
``sum``...) computed independently of gpucomm.  ``torch_too`` marks the cases torch.cuda.comm can
run (its six functions, CUDA devices only).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

Devs = list[torch.device]


@dataclass(frozen=True)
class Case:
    name: str
    call: Callable[[Any, Devs], Any]
    expect: Callable[[Devs], Any]
    n: int = 3
    torch_too: bool = True

    def __str__(self) -> str:
        return self.name


def ar(*shape: int, dtype: torch.dtype = torch.float32, start: int = 0) -> torch.Tensor:
    """Distinct small integers (exact in every dtype), shaped."""
    n = 1
    for s in shape:
        n *= s
    return (torch.arange(n) + start).reshape(shape).to(dtype)


def on(t: torch.Tensor, d: torch.device) -> torch.Tensor:
    return t.to(d)


def _uneven(n: int) -> list[list[int]]:
    """all_to_all_v's split sizes: participant i sends (i + j) mod 3 elements to j (some pieces empty)."""
    return [[(i + j) % 3 for j in range(n)] for i in range(n)]


def _sum(ts):
    return torch.stack(ts).sum(0)


def _all_reduce_case(op: str, fn: Callable[[torch.Tensor], torch.Tensor]) -> Case:
    # multiples of n, so that avg is exact however it is computed (NCCL scales each term by 1/n)
    def inputs(D):
        return [on(ar(2, 3, start=i + 1) * len(D), d) for i, d in enumerate(D)]

    def expect(D):
        want = fn(torch.stack([ar(2, 3, start=i + 1) * len(D) for i in range(len(D))]))
        return [on(want, d) for d in D]

    return Case(f"all_reduce_{op}", lambda m, D: m.all_reduce(inputs(D), op), expect, torch_too=False)


CASES: list[Case] = [
    # ----- broadcast --------------------------------------------------------------------------------
    Case("broadcast_1d", lambda m, D: m.broadcast(on(ar(3), D[0]), D),
         lambda D: [on(ar(3), d) for d in D]),
    Case("broadcast_2d_int", lambda m, D: m.broadcast(on(ar(2, 3, dtype=torch.int64), D[0]), D),
         lambda D: [on(ar(2, 3, dtype=torch.int64), d) for d in D]),
    Case("broadcast_out", lambda m, D: m.broadcast(on(ar(4), D[0]), out=[torch.zeros(4, device=d) for d in D]),
         lambda D: [on(ar(4), d) for d in D]),
    Case("broadcast_from_cpu", lambda m, D: m.broadcast(ar(5), D), lambda D: [on(ar(5), d) for d in D]),
    Case("broadcast_transposed", lambda m, D: m.broadcast(on(ar(3, 2), D[0]).t(), D),
         lambda D: [on(ar(3, 2).t(), d) for d in D]),
    Case("broadcast_coalesced", lambda m, D: m.broadcast_coalesced(
        [on(ar(3), D[0]), on(ar(2, 2, dtype=torch.int32), D[0]), on(ar(5, start=7), D[0])], D, buffer_size=16),
         lambda D: [[on(ar(3), d), on(ar(2, 2, dtype=torch.int32), d), on(ar(5, start=7), d)] for d in D]),
    # ----- reduce_add -------------------------------------------------------------------------------
    Case("reduce_add", lambda m, D: m.reduce_add([on(ar(2, 3, start=i), d) for i, d in enumerate(D)], D[0]),
         lambda D: on(_sum([ar(2, 3, start=i) for i in range(len(D))]), D[0])),
    Case("reduce_add_single", lambda m, D: m.reduce_add([on(ar(4), D[0])], D[0]), lambda D: on(ar(4), D[0]),
         n=1),
    Case("reduce_add_coalesced", lambda m, D: m.reduce_add_coalesced(
        [[on(ar(3, start=i), d), on(ar(2, dtype=torch.int64, start=10 * i), d)] for i, d in enumerate(D)],
        D[0], buffer_size=8),
         lambda D: (on(_sum([ar(3, start=i) for i in range(len(D))]), D[0]),
                    on(_sum([ar(2, dtype=torch.int64, start=10 * i) for i in range(len(D))]), D[0]))),
    # ----- scatter ----------------------------------------------------------------------------------
    Case("scatter_2x3_over_3", lambda m, D: m.scatter(on(ar(2, 3), D[0]), D),
         lambda D: tuple(on(c, d) for c, d in zip(ar(2, 3).chunk(3), D, strict=False))),
    Case("scatter_uneven_7", lambda m, D: m.scatter(on(ar(7, 2), D[0]), D),
         lambda D: tuple(on(c, d) for c, d in zip(ar(7, 2).chunk(3), D, strict=False))),
    Case("scatter_chunk_sizes", lambda m, D: m.scatter(on(ar(6, 2), D[0]), D, chunk_sizes=[1, 3, 2]),
         lambda D: tuple(on(c, d) for c, d in zip(ar(6, 2).split([1, 3, 2]), D, strict=True))),
    Case("scatter_dim1", lambda m, D: m.scatter(on(ar(2, 6), D[0]), D, dim=1),
         lambda D: tuple(on(c, d) for c, d in zip(ar(2, 6).chunk(3, 1), D, strict=True))),
    Case("scatter_dim_negative", lambda m, D: m.scatter(on(ar(2, 3, 6), D[0]), D, dim=-1),
         lambda D: tuple(on(c, d) for c, d in zip(ar(2, 3, 6).chunk(3, -1), D, strict=True))),
    Case("scatter_out", lambda m, D: m.scatter(on(ar(5, 2), D[0]), out=[
        torch.zeros(s, 2, device=d) for s, d in zip([2, 0, 3], D, strict=True)]),
         lambda D: tuple(on(c, d) for c, d in zip(ar(5, 2).split([2, 0, 3]), D, strict=True))),
    Case("scatter_from_cpu", lambda m, D: m.scatter(ar(6, 3), D),
         lambda D: tuple(on(c, d) for c, d in zip(ar(6, 3).chunk(3), D, strict=True))),
    Case("scatter_from_cpu_dim1", lambda m, D: m.scatter(ar(3, 6), D, dim=1),
         lambda D: tuple(on(c, d) for c, d in zip(ar(3, 6).chunk(3, 1), D, strict=True))),
    # ----- gather -----------------------------------------------------------------------------------
    Case("gather_dim0", lambda m, D: m.gather([on(ar(3, start=3 * i), d) for i, d in enumerate(D)], 0, D[0]),
         lambda D: on(ar(3 * len(D)), D[0])),
    Case("gather_same_three", lambda m, D: m.gather([on(ar(3), d) for d in D], destination=D[0]),
         lambda D: on(torch.cat([ar(3)] * len(D)), D[0])),
    Case("gather_dim1", lambda m, D: m.gather([on(ar(2, i + 1), d) for i, d in enumerate(D)], 1, D[0]),
         lambda D: on(torch.cat([ar(2, i + 1) for i in range(len(D))], 1), D[0])),
    Case("gather_to_cpu", lambda m, D: m.gather([on(ar(2, 2, start=i), d) for i, d in enumerate(D)], 0, "cpu"),
         lambda D: torch.cat([ar(2, 2, start=i) for i in range(len(D))])),
    Case("gather_to_cpu_dim1", lambda m, D: m.gather([on(ar(2, 2, start=i), d) for i, d in enumerate(D)], 1,
                                                     "cpu"),
         lambda D: torch.cat([ar(2, 2, start=i) for i in range(len(D))], 1)),
    Case("gather_out", lambda m, D: m.gather([on(ar(2, start=i), d) for i, d in enumerate(D)],
                                             out=torch.zeros(2 * len(D), device=D[-1])),
         lambda D: on(torch.cat([ar(2, start=i) for i in range(len(D))]), D[-1])),
    Case("gather_first_dtype_wins", lambda m, D: m.gather(
        [on(ar(2, dtype=torch.int64), D[0]), on(ar(2, dtype=torch.float64, start=5), D[1])], 0, D[0]),
         lambda D: on(torch.tensor([0, 1, 5, 6]), D[0]), n=2),
    # ----- the added collectives (no torch.cuda.comm counterpart) -----------------------------------
    *[_all_reduce_case(op, fn) for op, fn in (
        ("sum", lambda s: s.sum(0)), ("max", lambda s: s.amax(0)), ("min", lambda s: s.amin(0)),
        ("prod", lambda s: s.prod(0)), ("avg", lambda s: s.sum(0) / s.shape[0]))],
    Case("all_reduce_in_place", lambda m, D: (lambda ts: m.all_reduce(ts, out=ts))(
        [on(ar(4, start=i), d) for i, d in enumerate(D)]),
         lambda D: [on(_sum([ar(4, start=i) for i in range(len(D))]), d) for d in D], torch_too=False),
    Case("reduce_to_last", lambda m, D: m.reduce([on(ar(3, start=i), d) for i, d in enumerate(D)], D[-1]),
         lambda D: on(_sum([ar(3, start=i) for i in range(len(D))]), D[-1]), torch_too=False),
    Case("reduce_max_to_cpu", lambda m, D: m.reduce([on(ar(3, start=i), d) for i, d in enumerate(D)], "cpu", "max"),
         lambda D: ar(3, start=len(D) - 1), torch_too=False),
    Case("reduce_in_place_root", lambda m, D: (lambda ts: m.reduce(ts, None, out=ts[0]))(
        [on(ar(3, start=i), d) for i, d in enumerate(D)]),
         lambda D: on(_sum([ar(3, start=i) for i in range(len(D))]), D[0]), torch_too=False),
    Case("all_gather_dim0", lambda m, D: m.all_gather([on(ar(2, start=2 * i), d) for i, d in enumerate(D)]),
         lambda D: [on(ar(2 * len(D)), d) for d in D], torch_too=False),
    Case("all_gather_dim1", lambda m, D: m.all_gather([on(ar(2, 2, start=i), d) for i, d in enumerate(D)], 1),
         lambda D: [on(torch.cat([ar(2, 2, start=i) for i in range(len(D))], 1), d) for d in D], torch_too=False),
    Case("all_gather_out", lambda m, D: m.all_gather([on(ar(2, 2, start=4 * i), d) for i, d in enumerate(D)],
                                                     out=[torch.zeros(2 * len(D), 2, device=d) for d in D]),
         lambda D: [on(ar(2 * len(D), 2), d) for d in D], torch_too=False),
    Case("all_to_all_out", lambda m, D: m.all_to_all(
        [[on(ar(2, start=10 * i + 2 * j), D[i]) for j in range(len(D))] for i in range(len(D))],
        out=[[torch.zeros(2, device=D[j]) for _ in D] for j in range(len(D))]),
         lambda D: [[on(ar(2, start=10 * i + 2 * j), D[j]) for i in range(len(D))] for j in range(len(D))],
         torch_too=False),
    Case("all_gather_in_place", lambda m, D: (lambda outs: m.all_gather(
        [o.chunk(len(D))[i].copy_(ar(2, start=2 * i)) for i, o in enumerate(outs)], out=outs))(
        [torch.zeros(2 * len(D), device=d) for d in D]),
         lambda D: [on(ar(2 * len(D)), d) for d in D], torch_too=False),
    Case("reduce_scatter_dim0", lambda m, D: m.reduce_scatter([on(ar(6, 2, start=i), d) for i, d in enumerate(D)]),
         lambda D: [on(c, d) for c, d in zip(_sum([ar(6, 2, start=i) for i in range(len(D))]).chunk(len(D)), D,
                                             strict=True)], torch_too=False),
    Case("reduce_scatter_dim1_max", lambda m, D: m.reduce_scatter(
        [on(ar(2, 6, start=i), d) for i, d in enumerate(D)], 1, "max"),
         lambda D: [on(c, d) for c, d in zip(ar(2, 6, start=len(D) - 1).chunk(len(D), 1), D, strict=True)],
         torch_too=False),
    Case("all_to_all", lambda m, D: m.all_to_all([[on(ar(i + 1, start=10 * i + j), D[i]) for j in range(len(D))]
                                                   for i in range(len(D))]),
         lambda D: [[on(ar(i + 1, start=10 * i + j), D[j]) for i in range(len(D))] for j in range(len(D))],
         torch_too=False),
    Case("all_to_all_v", lambda m, D: m.all_to_all_v(
        [on(ar(sum(_uneven(len(D))[i]), start=10 * i), d) for i, d in enumerate(D)], _uneven(len(D))),
         lambda D: [on(torch.cat([ar(sum(_uneven(len(D))[i]), start=10 * i).split(_uneven(len(D))[i])[j]
                                  for i in range(len(D))]), d) for j, d in enumerate(D)], torch_too=False),
    Case("send_recv", lambda m, D: m.send_recv([on(ar(2, start=i), d) for i, d in enumerate(D)]),
         lambda D: [on(ar(2, start=(j - 1) % len(D)), d) for j, d in enumerate(D)], torch_too=False),
]


def assert_same(got: Any, want: Any, where: str = "result") -> None:
    """Same container types and lengths, and tensors equal in value, dtype, shape and device."""
    if isinstance(want, torch.Tensor):
        assert isinstance(got, torch.Tensor), f"{where}: expected a tensor, got {type(got).__name__}"
        assert got.device == want.device, f"{where}: device {got.device} != {want.device}"
        assert got.dtype == want.dtype, f"{where}: dtype {got.dtype} != {want.dtype}"
        assert got.shape == want.shape, f"{where}: shape {list(got.shape)} != {list(want.shape)}"
        assert torch.equal(got.cpu(), want.cpu()), f"{where}: {got} != {want}"
        return
    assert type(got) is type(want), f"{where}: type {type(got).__name__} != {type(want).__name__}"
    assert len(got) == len(want), f"{where}: length {len(got)} != {len(want)}"
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        assert_same(g, w, f"{where}[{i}]")
