"""THE test body for every Communicator: LocalCommunicator (CPU devices, GPUs) and ProcessGroupCommunicator.

:func:`check_collectives` runs every collective with every op, several dtypes and shapes, roots
0 and n-1, against expected values computed here from first principles (``torch.stack`` and
``torch.cat`` over every participant's input, built independently on each rank).  Inputs are small
integers, so every sum, product and power-of-two average is exact in every dtype and the results
must be *identical* across implementations.  The body returns a list of problems so that one run
reports all of them.

``prepared=True`` runs every collective as ``comm.prepare(name, ...)()`` instead of
``comm.name(...)``: the same expectations must hold.  Loaded by path by the test files beside it.
"""

from __future__ import annotations

import torch

from gpucomm.communicator import Communicator

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

    def __init__(self, comm: Communicator, prepared: bool):
        self.comm, self.n, self.mine, self.prepared = comm, comm.n, comm.participants, prepared
        self.problems: list[str] = []

    def call(self, name: str, *args) -> None:
        """``comm.name(*args)``, or prepared and then called once; a plain call's return value is checked."""
        if self.prepared:
            self.comm.prepare(name, *args)()
            return
        returned = getattr(self.comm, name)(*args)
        want = self.returns(name, args)
        same = (type(returned) is type(want) and len(returned) == len(want)
                and all(a is b for a, b in zip(returned, want, strict=True))
                if isinstance(want, list | tuple) else returned is want)
        if not same:
            self.problems.append(f"{name} returned {type(returned).__name__}, expected {type(want).__name__} "
                                 f"of the held outputs (what gpucomm.comm.{name} returns)")

    def returns(self, name: str, args: tuple):
        """What a method returns, written out per collective: its outputs as gpucomm.comm returns them."""
        if name in ("reduce", "gather"):  # one destination: the root's tensor where it is held, else None
            root = args[1] if name == "reduce" else args[2]
            return args[0][self.mine.index(root)] if root in self.mine else None
        if name == "scatter":
            return tuple(args[0])  # as torch.cuda.comm.scatter
        return list(args[0])  # the outputs (the tensors themselves for broadcast and all_reduce)

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
            c.expect_raises(f"all_reduce{tag}", ValueError, lambda op=op: c.call("all_reduce", c.inputs(full, dtype), op))
            continue
        everyone = torch.stack(c.everyone(full, dtype))
        red = _reduce(everyone, op, n, dtype)
        ts = c.inputs(full, dtype)
        c.call("all_reduce", ts, op)
        c.expect(f"all_reduce{tag}", ts, lambda p, red=red: red)
        for root in sorted({0, n - 1}):
            ts = c.inputs(full, dtype)
            c.call("reduce", ts, root, op)
            c.expect(f"reduce{tag} root={root}", ts, lambda p, r=root, red=red, e=everyone: red if p == r else e[p])
        outs = c.empty(chunk, dtype)
        c.call("reduce_scatter", outs, c.inputs(full, dtype), op)
        c.expect(f"reduce_scatter{tag}", outs, lambda p, red=red: red.chunk(n)[p])


def _moving(c: _Checker, dtype: torch.dtype, chunk: tuple[int, ...]) -> None:
    n, full, tag = c.n, _full(chunk, c.n), f"[{dtype} {list(chunk)}]"
    fulls, chunks = c.everyone(full, dtype, salt=1), c.everyone(chunk, dtype, salt=2)
    for root in sorted({0, n - 1}):
        ts = c.inputs(full, dtype, salt=1)
        c.call("broadcast", ts, root)
        c.expect(f"broadcast{tag} root={root}", ts, lambda p, r=root: fulls[r])
        outs = c.empty(chunk, dtype)
        ins = [t if p == root else None for p, t in zip(c.mine, c.inputs(full, dtype, salt=1), strict=True)]
        c.call("scatter", outs, ins, root)
        c.expect(f"scatter{tag} root={root}", outs, lambda p, r=root: fulls[r].chunk(n)[p])
        outs = [t if p == root else None for p, t in zip(c.mine, c.empty(full, dtype), strict=True)]
        c.call("gather", outs, c.inputs(chunk, dtype, salt=2), root)
        c.expect(f"gather{tag} root={root}", outs, lambda p, r=root: torch.cat(chunks) if p == r else None)
    outs = c.empty(full, dtype)
    c.call("all_gather", outs, c.inputs(chunk, dtype, salt=2))
    c.expect(f"all_gather{tag}", outs, lambda p: torch.cat(chunks))
    outs = c.empty(full, dtype)
    c.call("all_to_all", outs, c.inputs(full, dtype, salt=1))
    c.expect(f"all_to_all{tag}", outs, lambda j: torch.cat([fulls[i].chunk(n)[j] for i in range(n)]))
    outs = c.empty(full, dtype)
    c.call("send_recv", outs, c.inputs(full, dtype, salt=1))
    c.expect(f"send_recv{tag}", outs, lambda p: fulls[(p - 1) % n])
    # uneven: participant i sends ((i + 2j) mod 3) * rows to j (some pieces empty); every process the same matrix
    rows, rest = chunk[0], chunk[1:]
    sizes = [[(i + 2 * j) % 3 * rows for j in range(n)] for i in range(n)]
    sent = [_value(i, (sum(sizes[i]), *rest), dtype, salt=3) for i in range(n)]
    ins = [sent[p].to(d) for p, d in zip(c.mine, comm_devices(c), strict=True)]
    outs = [torch.full((sum(sizes[i][p] for i in range(n)), *rest), -7, dtype=dtype, device=d)
            for p, d in zip(c.mine, comm_devices(c), strict=True)]
    c.call("all_to_all_v", outs, ins, sizes)
    c.expect(f"all_to_all_v{tag}", outs, lambda j: torch.cat([sent[i].split(sizes[i])[j] for i in range(n)]))


def comm_devices(c: _Checker) -> list:
    return list(c.comm.devices)


def check_collectives(comm: Communicator, prepared: bool = False) -> list[str]:
    """THE test body: every collective, op, dtype and root on ``comm``; returns the problems found."""
    c = _Checker(comm, prepared)
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
